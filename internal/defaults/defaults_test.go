package defaults

import (
	"reflect"
	"testing"
	"time"
)

// TestEveryDefaultSet: no field of Defaults is left zero (a zero default means "unset"
// everywhere that fills from it).
func TestEveryDefaultSet(t *testing.T) {
	v := reflect.ValueOf(Defaults)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("Defaults.%s is zero", v.Type().Field(i).Name)
		}
	}
}

func TestFill(t *testing.T) {
	d, n := time.Duration(0), int64(-1)
	Fill(&d, time.Second)
	Fill(&n, 5)
	if d != time.Second || n != 5 {
		t.Errorf("Fill: %v %v", d, n)
	}
	keep := 3
	Fill(&keep, 9)
	if keep != 3 {
		t.Errorf("Fill overwrote a set value: %d", keep)
	}
}
