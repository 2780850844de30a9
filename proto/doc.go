// Package proto holds the .proto files of rbs's own APIs. The generated Go
// lives in sub-packages (workerpb, jobspb) and is committed; regenerate it with
//
//	go generate ./proto
//
// which needs protoc (Debian: protobuf-compiler).
package proto

//go:generate ./gen.sh
