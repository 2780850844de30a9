package blobstore

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	disk := func(dir string, max int64) *DiskSpec { return &DiskSpec{Dir: dir, MaxSize: max} }
	for _, tc := range []struct {
		text  string
		want  Spec
		canon string // String(); "" when it is text
	}{
		{text: "disk:/data/cas", want: disk("/data/cas", UnsetSize)},
		{text: "disk:rel/dir?max_size=50GiB", want: disk("rel/dir", 50<<30)},
		{text: "disk:/a?max_size=512M", want: disk("/a", 512<<20), canon: "disk:/a?max_size=512MiB"},
		{text: "disk:/a?max_size=0", want: disk("/a", 0), canon: "disk:/a?max_size=0B"},
		{text: "grpc://cas.example:8980", want: &GRPCSpec{Addr: "cas.example:8980"}},
		{text: "grpcs://cas.example:443/main/cas?token_file=/etc/rbs/token&ca=/etc/rbs/ca.pem",
			want: &GRPCSpec{TLS: true, Addr: "cas.example:443", Instance: "main/cas", TokenFile: "/etc/rbs/token", CACert: "/etc/rbs/ca.pem"}},
		{text: "grpc://[::1]:9092", want: &GRPCSpec{Addr: "[::1]:9092"}},
		{text: "s3://my-bucket?endpoint=http://minio:9000&region=us-east-1",
			want: &S3Spec{Bucket: "my-bucket", Endpoint: "http://minio:9000", Region: "us-east-1"}},
		{text: "s3://my.bucket/rbs/cas/", want: &S3Spec{Bucket: "my.bucket", Prefix: "rbs/cas"}, canon: "s3://my.bucket/rbs/cas"},
		{text: "shard(2*disk:/a,disk:/b)", want: &ShardSpec{Backends: []WeightedSpec{{2, disk("/a", UnsetSize)}, {1, disk("/b", UnsetSize)}}}},
		{text: "shard( disk:/a , 3 * disk:/b )", want: &ShardSpec{Backends: []WeightedSpec{{1, disk("/a", UnsetSize)}, {3, disk("/b", UnsetSize)}}},
			canon: "shard(disk:/a,3*disk:/b)"},
		{text: "mirror(disk:/a,grpc://b:1)", want: &MirrorSpec{A: disk("/a", UnsetSize), B: &GRPCSpec{Addr: "b:1"}}},
		{text: "cache(disk:/c?max_size=10GiB, grpc://cas:8980)",
			want:  &CacheSpec{Disk: disk("/c", 10<<30), Remote: &GRPCSpec{Addr: "cas:8980"}},
			canon: "cache(disk:/c?max_size=10GiB,grpc://cas:8980)"},
		{text: "cache(disk:/c,mirror(shard(grpc://a:1,grpc://b:1),s3://backup))",
			want: &CacheSpec{Disk: disk("/c", UnsetSize), Remote: &MirrorSpec{
				A: &ShardSpec{Backends: []WeightedSpec{{1, &GRPCSpec{Addr: "a:1"}}, {1, &GRPCSpec{Addr: "b:1"}}}},
				B: &S3Spec{Bucket: "backup"}}}},
	} {
		t.Run(tc.text, func(t *testing.T) {
			got, err := Parse(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %#v, want %#v", got, tc.want)
			}
			canon := tc.canon
			if canon == "" {
				canon = tc.text
			}
			if got.String() != canon {
				t.Fatalf("String() = %q, want %q", got.String(), canon)
			}
			again, err := Parse(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("Parse(String()) = %#v, %v", again, err)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		text   string
		column int
		msg    string
	}{
		{"", 1, "missing backend"},
		{"mirror(disk:/a)", 1, "mirror takes exactly two backends, got 1"},
		{"mirror(disk:/a,disk:/b,disk:/c)", 1, "mirror takes exactly two backends, got 3"},
		{"mirror()", 1, "mirror takes exactly two backends, got 0"},
		{"mirror(grpc://a:1, grpc://a:1?token_file=/t)", 20, "mirror's two backends are the same"},
		{"shard(disk:/a)", 1, "shard takes two backends or more, got 1"},
		{"shard(disk:/a,disk:/a/)", 15, "disk directory /a/ is already used at column 7"},
		{"mirror(disk:/a,cache(disk:/a,grpc://x:1))", 22, "disk directory /a is already used"},
		{"shard(grpc://a:1,grpc://a:1/)", 18, "empty segment"},
		{"shard(grpc://a:1,grpc://a:1)", 18, "shard has backend grpc://a:1 twice"},
		{"shard(0*disk:/a,disk:/b)", 7, `weight "0": want a whole number from 1 to 1000000`},
		{"2*disk:/a", 1, "weight 2* outside shard(...)"},
		{"mirror(2*disk:/a,disk:/b)", 8, "weight 2* outside shard"},
		{"cache(grpc://a:1,disk:/b)", 7, "cache's first backend must be a disk:DIR, got grpc://a:1"},
		{"cache(disk:/a)", 1, "cache takes exactly two backends"},
		{"tiered(disk:/a,disk:/b)", 1, `unknown backend "tiered("`},
		{"ftp://host/x", 1, `unknown backend "ftp://host/x"`},
		{"mirror(disk:/a,nfs:/b)", 16, `unknown backend "nfs:/b"`},
		{"grpc:/host:1", 1, `unknown backend "grpc:/host:1"`},
		{"disk:", 1, "want disk:DIR"},
		{"disk:/a?max_size=lots", 1, `max_size: invalid size "lots"`},
		{"disk:/a?max_size=1G&max_size=2G", 1, "parameter max_size given twice"},
		{"disk:/a?size=1G", 1, `unknown parameter "size" (want max_size)`},
		{"disk:/a?max_size=", 1, "parameter max_size has no value"},
		{"grpc://host", 1, `"host" is not HOST:PORT`},
		{"grpc://:8980", 1, `":8980" is not HOST:PORT`},
		{"grpc://host:http", 1, `port "http"`},
		{"grpc://host:70000", 1, `port "70000"`},
		{"grpc://host:1?token=abc", 1, `unknown parameter "token" (want token_file, ca)`},
		{"s3://B", 1, `bucket "B"`},
		{"s3://bucket?endpoint=minio:9000", 1, `endpoint "minio:9000": want an http:// or https:// URL`},
		{"s3://bucket?prefix=x", 1, `unknown parameter "prefix" (want endpoint, region)`},
		{"mirror(disk:/a,disk:/b", 1, "mirror( is never closed"},
		{"mirror(disk:/a disk:/b)", 15, `unexpected space in "disk:/a disk:/b": separate backends with ','`},
		{"disk:/a)", 8, `unexpected ")" after the spec`},
		{"mirror(disk:/a,disk:/b) x", 25, `unexpected "x" after the spec`},
		{"disk:/a(1)", 8, "unexpected '('"},
		{"shard(disk:/a,,disk:/b)", 15, "missing backend"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			s, err := Parse(tc.text)
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Parse = %v, %v; want a SpecError", s, err)
			}
			if se.Column != tc.column || !strings.Contains(se.Msg, tc.msg) {
				t.Fatalf("Parse: %v; want %q at column %d", err, tc.msg, tc.column)
			}
			if !strings.HasPrefix(err.Error(), `"`+strings.ReplaceAll(tc.text, `"`, `\"`)+`": `) {
				t.Fatalf("error %q does not start with the spec", err)
			}
		})
	}
}

func TestDiskDirs(t *testing.T) {
	s, err := Parse("cache(disk:/c/, mirror(shard(disk:/a,grpc://x:1), disk:/b))")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := DiskDirs(s), []string{"/c", "/a", "/b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("DiskDirs = %v, want %v", got, want)
	}
}
