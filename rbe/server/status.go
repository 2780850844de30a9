package server

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
)

// zstdDecoder is shared for DecodeAll, which is safe for concurrent use; it is
// made on first use to keep start-up cheap.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil)
	if err != nil {
		panic(err) // only invalid options make this fail
	}
	return d
})

// statusProto turns an error into the google.rpc.Status of a batch response.
func statusProto(err error) *spb.Status {
	if err == nil {
		return &spb.Status{}
	}
	return status.Convert(err).Proto()
}
