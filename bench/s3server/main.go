// Command s3server runs a throw-away S3 server (Ceph radosgw, see
// rbe/blobstore/s3test) in a directory for a benchmark script: once it is
// ready it prints shell assignments of S3_ENDPOINT, S3_REGION, S3_BUCKET,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY on one line, then serves until
// it is sent SIGTERM or SIGINT.
//
//	go run ./bench/s3server DIR
package main

import (
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/rbs-build/rbs/rbe/blobstore/s3test"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: s3server DIR")
	}
	s, stop, err := s3test.Run(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	fmt.Printf("S3_ENDPOINT=%s S3_REGION=%s S3_BUCKET=%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s\n",
		s.Endpoint, s.Region, s.Bucket, s.AccessKey, s.SecretKey)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
