package watch

import "testing"

func TestHub(t *testing.T) {
	var h Hub
	a, stopA := h.Add("a")
	b, stopB := h.Add("b")
	a2, stopA2 := h.Add("a")
	h.Signal("a")
	h.Signal("a") // a full buffer does not block
	for name, ch := range map[string]<-chan struct{}{"a": a, "a2": a2} {
		select {
		case <-ch:
		default:
			t.Errorf("watch %s not signalled", name)
		}
	}
	select {
	case <-b:
		t.Error("watch of b signalled by a settle of a")
	default:
	}
	h.SignalAll()
	for name, ch := range map[string]<-chan struct{}{"a": a, "a2": a2, "b": b} {
		select {
		case <-ch:
		default:
			t.Errorf("watch %s not signalled by SignalAll", name)
		}
	}
	stopA()
	stopA() // twice is harmless
	if n := h.Len(); n != 2 {
		t.Errorf("Len = %d after one of two watches of a stopped, want 2", n)
	}
	stopA2()
	stopB()
	if n := h.Len(); n != 0 {
		t.Errorf("Len = %d after every watch stopped, want 0", n)
	}
	h.Signal("a")
	select {
	case <-a:
		t.Error("a stopped watch was signalled")
	default:
	}
}
