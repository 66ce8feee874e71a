package fakes_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/oncely/oncely/fakes"
)

// Listen serves a handler on 127.0.0.1, as every fake's Server does; a
// fake of one's own records what it committed in a Journal.
func ExampleListen() {
	var journal fakes.Journal
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notes", func(w http.ResponseWriter, r *http.Request) {
		e := journal.Append(fakes.Effect{Kind: "note", Key: r.Header.Get("Idempotency-Key")})
		fmt.Fprintf(w, "note %d", e.Seq)
	})
	srv := fakes.Listen(mux)
	defer srv.Close()

	resp, err := srv.Client().Post(srv.URL+"/notes", "text/plain", nil)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body), "effects:", journal.Len())
	// Output: 200 note 1 effects: 1
}

// Filter picks a journal's effects of one kind, and of one key when the
// key is not empty: a test counts the refunds of one action.
func ExampleFilter() {
	var journal fakes.Journal
	journal.Append(fakes.Effect{Kind: fakes.KindRefund, ID: "re_1", Key: "k1"})
	journal.Append(fakes.Effect{Kind: fakes.KindPaymentIntent, ID: "pi_1", Key: "k2"})
	journal.Append(fakes.Effect{Kind: fakes.KindRefund, ID: "re_2", Key: "k3"})

	effects := journal.Snapshot()
	fmt.Println("refunds:", len(fakes.Filter(effects, fakes.KindRefund, "")))
	for _, e := range fakes.Filter(effects, fakes.KindRefund, "k3") {
		fmt.Println(e.Seq, e.ID)
	}
	// Output:
	// refunds: 2
	// 3 re_2
}
