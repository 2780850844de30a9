// Package codec provides the gRPC codec of rbs's servers and clients:
// protobuf, with the messages of FindMissingBlobs, which carry thousands of
// digests, encoded and decoded by hand.
//
// protobuf-go allocates a message and a string for every digest it decodes
// and walks each through reflection-driven tables: 3.4 ms for a request of
// 10,000 digests on a 2-core machine, where a cache's lookup of them takes
// 0.3 ms. Here the digests of one message share one block of Digest
// messages and one string. Every other message, and any FindMissingBlobs
// message the hand-written form does not cover (unknown fields, a field
// with an unexpected wire type, a string that is not ASCII), goes through
// protobuf-go: the bytes on the wire, and the messages a handler sees, are
// the same either way.
package codec

import (
	"strings"
	"unicode/utf8"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Codec is the codec; use it with grpc.ForceServerCodecV2 and
// grpc.ForceCodecV2. It keeps the stock codec's name, so peers see plain
// protobuf.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// stock is grpc's own protobuf codec, for every other message.
var stock = encoding.GetCodecV2(protocodec.Name)

// Field numbers of the messages encoded here.
const (
	requestInstance = 1 // FindMissingBlobsRequest.instance_name
	requestDigests  = 2 // FindMissingBlobsRequest.blob_digests
	requestFunction = 3 // FindMissingBlobsRequest.digest_function
	responseDigests = 2 // FindMissingBlobsResponse.missing_blob_digests
	digestHash      = 1 // Digest.hash
	digestSizeBytes = 2 // Digest.size_bytes
)

// Name implements encoding.CodecV2.
func (Codec) Name() string { return protocodec.Name }

// Marshal implements encoding.CodecV2.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *repb.FindMissingBlobsRequest:
		if plain(m) && plainDigests(m.BlobDigests) {
			return encode(func(b []byte) []byte {
				if m.InstanceName != "" {
					b = protowire.AppendTag(b, requestInstance, protowire.BytesType)
					b = protowire.AppendString(b, m.InstanceName)
				}
				b = appendDigests(b, requestDigests, m.BlobDigests)
				if m.DigestFunction != 0 {
					b = protowire.AppendTag(b, requestFunction, protowire.VarintType)
					b = protowire.AppendVarint(b, uint64(m.DigestFunction))
				}
				return b
			}, requestSize(m)), nil
		}
	case *repb.FindMissingBlobsResponse:
		if plain(m) && plainDigests(m.MissingBlobDigests) {
			return encode(func(b []byte) []byte {
				return appendDigests(b, responseDigests, m.MissingBlobDigests)
			}, digestsSize(responseDigests, m.MissingBlobDigests)), nil
		}
	}
	return stock.Marshal(v)
}

// Unmarshal implements encoding.CodecV2.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *repb.FindMissingBlobsRequest:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		if decodeRequest(buf.ReadOnlyData(), m) {
			return nil
		}
		return proto.Unmarshal(buf.ReadOnlyData(), m)
	case *repb.FindMissingBlobsResponse:
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		if decodeResponse(buf.ReadOnlyData(), m) {
			return nil
		}
		return proto.Unmarshal(buf.ReadOnlyData(), m)
	}
	return stock.Unmarshal(data, v)
}

// plain reports whether m carries no unknown fields, which only
// protobuf-go keeps.
func plain(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) == 0 }

func plainDigests(ds []*repb.Digest) bool {
	for _, d := range ds {
		if d == nil || !plain(d) {
			return false
		}
	}
	return true
}

// encode returns the size bytes that fill appends, in a pooled buffer
// when they are many, as the stock codec does.
func encode(fill func([]byte) []byte, size int) mem.BufferSlice {
	if mem.IsBelowBufferPoolingThreshold(size) {
		return mem.BufferSlice{mem.SliceBuffer(fill(make([]byte, 0, size)))}
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	*buf = fill((*buf)[:0])
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}
}

func requestSize(m *repb.FindMissingBlobsRequest) int {
	n := digestsSize(requestDigests, m.BlobDigests)
	if m.InstanceName != "" {
		n += protowire.SizeTag(requestInstance) + protowire.SizeBytes(len(m.InstanceName))
	}
	if m.DigestFunction != 0 {
		n += protowire.SizeTag(requestFunction) + protowire.SizeVarint(uint64(m.DigestFunction))
	}
	return n
}

// digestSize is the size of d's encoding, without its tag and length.
func digestSize(d *repb.Digest) int {
	n := 0
	if d.Hash != "" {
		n += protowire.SizeTag(digestHash) + protowire.SizeBytes(len(d.Hash))
	}
	if d.SizeBytes != 0 {
		n += protowire.SizeTag(digestSizeBytes) + protowire.SizeVarint(uint64(d.SizeBytes))
	}
	return n
}

func digestsSize(field protowire.Number, ds []*repb.Digest) int {
	n := 0
	for _, d := range ds {
		n += protowire.SizeTag(field) + protowire.SizeBytes(digestSize(d))
	}
	return n
}

func appendDigests(b []byte, field protowire.Number, ds []*repb.Digest) []byte {
	for _, d := range ds {
		b = protowire.AppendTag(b, field, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(digestSize(d)))
		if d.Hash != "" {
			b = protowire.AppendTag(b, digestHash, protowire.BytesType)
			b = protowire.AppendString(b, d.Hash)
		}
		if d.SizeBytes != 0 {
			b = protowire.AppendTag(b, digestSizeBytes, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(d.SizeBytes))
		}
	}
	return b
}

// decodeRequest decodes b into m and reports whether it could; when it
// could not, m is unchanged.
func decodeRequest(b []byte, m *repb.FindMissingBlobsRequest) bool {
	var instance string
	var function uint64
	list := digestList{field: requestDigests}
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return false
		}
		rest = rest[n:]
		switch {
		case num == requestInstance && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(rest)
			if n < 0 || !utf8.Valid(v) {
				return false
			}
			instance, rest = string(v), rest[n:]
		case num == requestDigests && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(rest)
			if n < 0 || !list.count(v) {
				return false
			}
			rest = rest[n:]
		case num == requestFunction && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(rest)
			if n < 0 {
				return false
			}
			function, rest = v, rest[n:]
		default:
			return false
		}
	}
	proto.Reset(m)
	m.InstanceName = instance
	m.BlobDigests = list.decode(b)
	m.DigestFunction = repb.DigestFunction_Value(int32(function))
	return true
}

// decodeResponse decodes b into m and reports whether it could; when it
// could not, m is unchanged.
func decodeResponse(b []byte, m *repb.FindMissingBlobsResponse) bool {
	list := digestList{field: responseDigests}
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 || num != responseDigests || typ != protowire.BytesType {
			return false
		}
		rest = rest[n:]
		v, n := protowire.ConsumeBytes(rest)
		if n < 0 || !list.count(v) {
			return false
		}
		rest = rest[n:]
	}
	proto.Reset(m)
	m.MissingBlobDigests = list.decode(b)
	return true
}

// digestList decodes the repeated Digest field of a message in two passes:
// count checks each digest and adds up what the list needs, and decode,
// once the whole message is known to be decodable, fills one block of
// messages whose hashes are slices of one string.
type digestList struct {
	field     protowire.Number
	digests   int
	hashBytes int
}

// count checks one encoded Digest: only its two fields, with their wire
// types, a hash given at most once, and an ASCII one (protobuf-go checks
// strings for UTF-8).
func (l *digestList) count(b []byte) bool {
	hashed := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == digestHash && typ == protowire.BytesType && !hashed:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !ascii(v) {
				return false
			}
			hashed = true
			l.hashBytes += len(v)
			b = b[n:]
		case num == digestSizeBytes && typ == protowire.VarintType:
			_, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
		default:
			return false
		}
	}
	l.digests++
	return true
}

func ascii(b []byte) bool {
	var or byte
	for _, c := range b {
		or |= c
	}
	return or < utf8.RuneSelf
}

// decode fills the list from msg, whose fields count has checked. A size
// given twice keeps its last value, as protobuf's rule is.
func (l *digestList) decode(msg []byte) []*repb.Digest {
	if l.digests == 0 {
		return nil
	}
	block := make([]repb.Digest, l.digests)
	out := make([]*repb.Digest, l.digests)
	ends := make([]int, l.digests) // where each digest's hash ends in hashes
	var hashes strings.Builder
	hashes.Grow(l.hashBytes)
	i := 0
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		msg = msg[n:]
		if num != l.field || typ != protowire.BytesType {
			msg = msg[protowire.ConsumeFieldValue(num, typ, msg):]
			continue
		}
		f, n := protowire.ConsumeBytes(msg)
		msg = msg[n:]
		for len(f) > 0 {
			num, _, k := protowire.ConsumeTag(f)
			f = f[k:]
			if num == digestHash {
				h, k := protowire.ConsumeBytes(f)
				hashes.Write(h)
				f = f[k:]
			} else {
				v, k := protowire.ConsumeVarint(f)
				block[i].SizeBytes = int64(v)
				f = f[k:]
			}
		}
		ends[i] = hashes.Len()
		out[i] = &block[i]
		i++
	}
	all := hashes.String()
	start := 0
	for i, end := range ends {
		block[i].Hash = all[start:end]
		start = end
	}
	return out
}
