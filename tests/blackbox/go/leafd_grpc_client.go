// leafd_grpc_client: Go's gRPC client (Debian's golang-google-grpc-dev,
// stubs from proto/leafd/v1/leafd.proto by protoc-gen-go plugins=grpc)
// against a running leafd; tests/blackbox/bb_grpc.py builds and runs it.
// Usage: leafd_grpc_client <host:port>. Prints one "name value" line per
// result; exits 1 on an unexpected error.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	leafdv1 "leafd/gen/leafd/v1"
)

func fail(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

func main() {
	conn, err := grpc.Dial(os.Args[1], grpc.WithInsecure())
	if err != nil {
		fail("dial: %v", err)
	}
	defer conn.Close()
	c := leafdv1.NewIdServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r, err := c.NextSegment(ctx, &leafdv1.SegmentRequest{BizTag: "demo", Count: 3})
	if err != nil {
		fail("NextSegment: %v", err)
	}
	fmt.Println("segment", r.Ids)
	sf, err := c.NextSnowflake(ctx, &leafdv1.CountRequest{Count: 2})
	if err != nil {
		fail("NextSnowflake: %v", err)
	}
	fmt.Println("snowflake", sf.Ids)
	d, err := c.Decode(ctx, &leafdv1.DecodeRequest{Id: sf.Ids[0]})
	if err != nil {
		fail("Decode: %v", err)
	}
	fmt.Println("decode", d.Id, d.TimestampMs, d.WorkerId, d.Sequence)
	u, err := c.NextUuid(ctx, &leafdv1.CountRequest{Count: 1})
	if err != nil {
		fail("NextUuid: %v", err)
	}
	fmt.Println("uuid", u.Ids[0])
	l, err := c.Lease(ctx, &leafdv1.LeaseRequest{BizTag: "demo", Size: 100})
	if err != nil {
		fail("Lease: %v", err)
	}
	n := int64(0)
	for _, x := range l.Ranges {
		n += x.End - x.Start
	}
	fmt.Println("lease", n)

	_, err = c.NextSegment(ctx, &leafdv1.SegmentRequest{BizTag: "no-such-tag"})
	st, _ := status.FromError(err)
	if st.Code() != codes.NotFound || !strings.HasPrefix(st.Message(), "unknown_biz_tag: ") {
		fail("unknown tag: %v", err)
	}
	fmt.Println("notfound", st.Code())

	h, err := grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		fail("Health: %v", err)
	}
	fmt.Println("health", h.Status)

	// 64 goroutines, 20 calls each, on the one connection: IDs distinct.
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				r, err := c.NextSegment(ctx, &leafdv1.SegmentRequest{BizTag: "demo", Count: 5})
				if err != nil {
					fail("concurrent NextSegment: %v", err)
				}
				mu.Lock()
				for _, id := range r.Ids {
					if seen[id] {
						fail("ID %d twice", id)
					}
					seen[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Println("distinct", len(seen))
}
