package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCreateTask measures one durable task creation (one commit) at a time.
func BenchmarkCreateTask(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "bench.db"))
	ctx := b.Context()
	i := 0
	for b.Loop() {
		if err := s.CreateTask(ctx, testTask(fmt.Sprintf("task-%09d", i))); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creations/s")
}

// BenchmarkCreateTaskParallel measures creations from many goroutines, which queue for the
// one writer connection.
func BenchmarkCreateTaskParallel(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "bench.db"))
	ctx := b.Context()
	start := time.Now()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("%p", pb)
		for i := 0; pb.Next(); i++ {
			if err := s.CreateTask(ctx, testTask(fmt.Sprintf("%s-%09d", id, i))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "creations/s")
}

// BenchmarkGetTask measures reads by id from the read pool, in parallel.
func BenchmarkGetTask(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "bench.db"))
	ctx := b.Context()
	const n = 2_000
	for i := range n {
		if err := s.CreateTask(ctx, testTask(fmt.Sprintf("task-%09d", i))); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			if _, err := s.GetTask(ctx, fmt.Sprintf("task-%09d", i%n)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
