package fault_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/oncely/oncely/fakes/fault"
)

// A fake applies the injector's decision around its commit step; here the
// second request on the route commits and then loses its answer.
func Example() {
	faults := fault.NewInjector(42)
	faults.Add(fault.Rule{Route: "POST /v1/things", Attempt: 2, Action: fault.CommitThenDrop})

	committed := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/things", func(w http.ResponseWriter, r *http.Request) {
		errf := func(status int, msg string) fault.Response {
			return fault.Response{Status: status, Body: []byte(msg)}
		}
		faults.Decide(r).Serve(w, r, errf, func() fault.Response {
			committed++
			return fault.Response{Status: http.StatusCreated, Body: []byte("ok")}
		})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		resp, err := client.Post(srv.URL+"/v1/things", "text/plain", strings.NewReader("{}"))
		if err != nil {
			fmt.Println("transport error")
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	fmt.Println("committed:", committed)
	for _, a := range faults.Log() {
		fmt.Println(a)
	}
	// Output:
	// 201 ok
	// transport error
	// 201 ok
	// committed: 3
	// request 2 (POST /v1/things, attempt 2 on POST /v1/things): rule CommitThenDrop on POST /v1/things attempt 2
}
