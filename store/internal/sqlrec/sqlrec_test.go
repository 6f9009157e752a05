package sqlrec

import (
	"strconv"
	"testing"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// TestTaskQuery: one condition per set field, in order, numbered by the dialect's
// placeholder; none gives no WHERE at all. (The stores' own tests run every query.)
func TestTaskQuery(t *testing.T) {
	pg := func(n int) string { return "$" + strconv.Itoa(n) }
	where, args := TaskQuery(store.TaskQuery{Owner: "o", Status: record.StatusWorking}, pg)
	if where != ` WHERE owner = $1 AND status = $2` || len(args) != 2 || args[0] != "o" || args[1] != "working" {
		t.Errorf("TaskQuery = %q %v", where, args)
	}
	if where, args := TaskQuery(store.TaskQuery{}, pg); where != "" || len(args) != 0 {
		t.Errorf("empty query = %q %v", where, args)
	}
}

// TestArgsMatchColumns: the argument lists have one value per column they write.
func TestArgsMatchColumns(t *testing.T) {
	count := func(cols string) int {
		n := 1
		for _, c := range cols {
			if c == ',' {
				n++
			}
		}
		return n
	}
	if got, want := len(TaskInsertArgs(&record.Task{})), count(TaskColumns)-1; got != want { // version is the literal 1
		t.Errorf("TaskInsertArgs: %d values for %d columns", got, want)
	}
	if got, want := len(SessionArgs(&record.Session{})), count(SessionColumns); got != want {
		t.Errorf("SessionArgs: %d values for %d columns", got, want)
	}
	if got, want := len(InputArgs(record.Input{})), count(InputColumns); got != want {
		t.Errorf("InputArgs: %d values for %d columns", got, want)
	}
}
