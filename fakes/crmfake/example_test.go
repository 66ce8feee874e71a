package crmfake_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/oncely/oncely/fakes/crmfake"
)

// Upserting by external id twice leaves one contact and one effect; plain
// creates would have made two.
func Example() {
	s := crmfake.NewServer(nil)
	defer s.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPut, s.URL+"/v1/contacts/by-external-id/act-42",
			strings.NewReader(`{"email":"ada@example.test","name":"Ada"}`))
		resp, err := s.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	for _, e := range s.Journal() {
		fmt.Println(e.Kind, e.Key, e.Params["email"])
	}
	// Output:
	// 201
	// 200
	// contact.upsert act-42 ada@example.test
}
