package server

import (
	"sync"

	"github.com/klauspost/compress/zstd"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
)

// maxZstdWindow is the largest zstd window the server decodes with: 8 MiB,
// the most RFC 8878 asks decoders to support, so that a frame header cannot
// make the server allocate more.
const maxZstdWindow = 8 << 20

// zstdDecoder is shared for DecodeAll, which is safe for concurrent use; it is
// made on first use to keep start-up cheap. It decodes no more than a batch
// holds, so a zstd bomb fails instead of filling memory.
var zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxBatchSize), zstd.WithDecoderMaxWindow(maxZstdWindow))
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
