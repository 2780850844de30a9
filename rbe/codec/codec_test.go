package codec

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// randomDigests returns n digests with the values protobuf treats
// specially: empty hashes, zero and negative sizes, large sizes.
func randomDigests(r *rand.Rand, n int) []*repb.Digest {
	ds := make([]*repb.Digest, n)
	for i := range ds {
		d := &repb.Digest{Hash: fmt.Sprintf("%064x", r.Uint64()), SizeBytes: r.Int63n(1 << 40)}
		switch r.Intn(6) {
		case 0:
			d.Hash = ""
		case 1:
			d.SizeBytes = 0
		case 2:
			d.SizeBytes = -r.Int63n(100) - 1
		case 3:
			d.Hash = d.Hash[:r.Intn(64)]
		}
		ds[i] = d
	}
	return ds
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	data, err := Codec{}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data.Materialize()
}

// TestMarshalAsProtobuf: every message the codec encodes by hand comes
// out byte for byte as protobuf-go encodes it, and decodes, by hand, to a
// message equal to protobuf-go's decoding.
func TestMarshalAsProtobuf(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	var msgs []proto.Message
	for _, n := range []int{0, 1, 2, 17, 3000} {
		msgs = append(msgs,
			&repb.FindMissingBlobsResponse{MissingBlobDigests: randomDigests(r, n)},
			&repb.FindMissingBlobsRequest{BlobDigests: randomDigests(r, n)},
			&repb.FindMissingBlobsRequest{InstanceName: "main/ünïcode", BlobDigests: randomDigests(r, n), DigestFunction: repb.DigestFunction_SHA256},
			&repb.FindMissingBlobsRequest{InstanceName: "x", BlobDigests: randomDigests(r, n), DigestFunction: 99},
		)
	}
	for i, m := range msgs {
		got := marshal(t, m)
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("message %d (%T): the codec's encoding differs from protobuf-go's", i, m)
		}
		back := m.ProtoReflect().New().Interface()
		if !decodes(got, back) {
			t.Fatalf("message %d (%T): not decoded by hand", i, m)
		}
		if !proto.Equal(back, m) {
			t.Fatalf("message %d (%T): decoded to a different message", i, m)
		}
	}
}

// decodes decodes b into m by hand and reports whether it could.
func decodes(b []byte, m proto.Message) bool {
	switch m := m.(type) {
	case *repb.FindMissingBlobsRequest:
		return decodeRequest(b, m)
	case *repb.FindMissingBlobsResponse:
		return decodeResponse(b, m)
	}
	panic(fmt.Sprintf("no hand decoding of %T", m))
}

// field is one encoded field of a hand-built message.
func field(num protowire.Number, typ protowire.Type, v any) []byte {
	b := protowire.AppendTag(nil, num, typ)
	switch v := v.(type) {
	case string:
		return protowire.AppendString(b, v)
	case []byte:
		return protowire.AppendBytes(b, v)
	case uint64:
		return protowire.AppendVarint(b, v)
	}
	panic(v)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var hash = fmt.Sprintf("%064x", 42)

// TestUnmarshalAsProtobuf: on encodings no protobuf-go encoder writes, the
// codec decodes what protobuf-go decodes and fails where it fails; it
// decodes by hand only the forms it is meant to.
func TestUnmarshalAsProtobuf(t *testing.T) {
	digest := func(parts ...[]byte) []byte { return field(2, protowire.BytesType, cat(parts...)) }
	h := field(1, protowire.BytesType, hash)
	size := func(n uint64) []byte { return field(2, protowire.VarintType, n) }
	longTag := []byte{0x92, 0x00} // field 2, bytes, with a needless second varint byte
	for _, c := range []struct {
		name   string
		wire   []byte
		byHand bool
	}{
		{"empty", nil, true},
		{"fields out of order", cat(field(3, protowire.VarintType, uint64(1)), digest(size(5), h), field(1, protowire.BytesType, "i")), true},
		{"a size given twice", digest(h, size(5), size(7)), true},
		{"an instance given twice", cat(field(1, protowire.BytesType, "a"), field(1, protowire.BytesType, "b")), true},
		{"a tag of two bytes", cat(longTag, protowire.AppendBytes(nil, cat(h, size(3)))), true},
		{"an empty digest", digest(), true},
		{"a hash given twice", digest(h, size(1), field(1, protowire.BytesType, "ab")), false},
		{"an unknown field", cat(digest(h), field(9, protowire.VarintType, uint64(1))), false},
		{"an unknown field in a digest", digest(h, field(7, protowire.BytesType, "x")), false},
		{"a wire type protobuf keeps as unknown", cat(field(2, protowire.VarintType, uint64(1))), false},
		{"a hash that is not ASCII", digest(field(1, protowire.BytesType, "hé")), false},
		{"an instance that is not UTF-8", field(1, protowire.BytesType, []byte{0xff}), false},
		{"a hash that is not UTF-8", digest(field(1, protowire.BytesType, []byte{0xff})), false},
		{"a truncated digest", digest(h)[:20], false},
		{"a truncated varint", cat(digest(h), []byte{0x18, 0x80}), false},
		{"a length past the end", cat([]byte{0x12, 0x7f}, h), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := &repb.FindMissingBlobsRequest{}
			wantErr := proto.Unmarshal(c.wire, want)
			got := &repb.FindMissingBlobsRequest{InstanceName: "left over"}
			err := Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(c.wire)}, got)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("error %v, protobuf-go's %v", err, wantErr)
			}
			if err == nil && !proto.Equal(got, want) {
				t.Fatalf("decoded %v, protobuf-go %v", got, want)
			}
			if byHand := decodeRequest(c.wire, &repb.FindMissingBlobsRequest{}); byHand != c.byHand {
				t.Fatalf("decoded by hand: %v, want %v", byHand, c.byHand)
			}
			// A response is the same list of digests at the same field.
			if c.byHand && bytes.HasPrefix(c.wire, digest()[:1]) {
				resp := &repb.FindMissingBlobsResponse{}
				wantResp := &repb.FindMissingBlobsResponse{}
				if proto.Unmarshal(c.wire, wantResp) == nil && decodeResponse(c.wire, resp) && !proto.Equal(resp, wantResp) {
					t.Fatalf("response decoded %v, protobuf-go %v", resp, wantResp)
				}
			}
		})
	}
}

// TestOtherMessagesAsStock: messages the codec does not know, and known
// ones carrying what only protobuf-go keeps, go through protobuf-go.
func TestOtherMessagesAsStock(t *testing.T) {
	withUnknown := &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{{Hash: hash, SizeBytes: 3}}}
	withUnknown.BlobDigests[0].ProtoReflect().SetUnknown(field(9, protowire.VarintType, uint64(4)))
	for _, m := range []proto.Message{
		&repb.Action{CommandDigest: &repb.Digest{Hash: hash, SizeBytes: 1}, DoNotCache: true},
		withUnknown,
	} {
		got := marshal(t, m)
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%T: encoded differently from protobuf-go", m)
		}
		back := m.ProtoReflect().New().Interface()
		if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(got)}, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(back, m) {
			t.Fatalf("%T: decoded to a different message", m)
		}
	}
	// A nil digest is protobuf-go's to answer for.
	nilDigest := &repb.FindMissingBlobsRequest{BlobDigests: []*repb.Digest{nil}}
	_, err := Codec{}.Marshal(nilDigest)
	if _, perr := proto.Marshal(nilDigest); (err != nil) != (perr != nil) {
		t.Fatalf("a nil digest: error %v, protobuf-go's %v", err, perr)
	}
}

// BenchmarkFindMissing10k decodes and encodes a request of 10,000 digests
// and its response of 5,000, the codec's way and protobuf-go's.
func BenchmarkFindMissing10k(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	req := &repb.FindMissingBlobsRequest{BlobDigests: randomDigests(r, 10000)}
	resp := &repb.FindMissingBlobsResponse{MissingBlobDigests: req.BlobDigests[:5000]}
	wire, _ := proto.Marshal(req)
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"codec", func() {
			Codec{}.Marshal(req)
			Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, &repb.FindMissingBlobsRequest{})
			Codec{}.Marshal(resp)
		}},
		{"protobuf", func() {
			proto.Marshal(req)
			proto.Unmarshal(wire, &repb.FindMissingBlobsRequest{})
			proto.Marshal(resp)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				c.run()
			}
		})
	}
}
