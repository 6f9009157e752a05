package pending

import "testing"

func TestRegistry(t *testing.T) {
	var r Registry[*int]
	same := func(a, b *int) bool { return a == b }
	one, two := new(int), new(int)
	remove := r.Put("k", one, same)
	r.Put("k", two, same) // replaced
	remove()              // removes only its own value
	if v, ok := r.Get("k"); !ok || v != two {
		t.Fatalf("Get = %v, %v: the replacing value was removed", v, ok)
	}
	if _, found, taken := r.TakeIf("k", func(v *int) bool { return v == one }); !found || taken {
		t.Errorf("TakeIf with a refusing check: found %v taken %v", found, taken)
	}
	if v, _, taken := r.TakeIf("k", func(*int) bool { return true }); !taken || v != two {
		t.Errorf("TakeIf: %v %v", v, taken)
	}
	if _, ok := r.Get("k"); ok {
		t.Error("taken value still there")
	}
	if Key("s", "7") != "s\x007" {
		t.Error("Key")
	}
}
