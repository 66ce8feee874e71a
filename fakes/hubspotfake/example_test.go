package hubspotfake_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/oncely/oncely/fakes/hubspotfake"
)

// An upsert by the unique property oncely_key creates the contact once;
// repeating it finds the same record and changes nothing.
func Example() {
	s := hubspotfake.NewServer(nil)
	defer s.Close()

	upsert := `{"inputs": [{"idProperty": "oncely_key", "id": "act-7", "properties": {"email": "ada@example.com"}}]}`
	for range 2 {
		req, err := http.NewRequest("POST", s.URL+"/crm/v3/objects/contacts/batch/upsert", strings.NewReader(upsert))
		if err != nil {
			fmt.Println(err)
			return
		}
		req.Header.Set("Authorization", "Bearer pat-test")
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		var out struct {
			Results []struct {
				ID  string `json:"id"`
				New bool   `json:"new"`
			} `json:"results"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, out.Results[0].ID, "new:", out.Results[0].New)
	}
	j := s.Journal()
	fmt.Println("effects:", len(j), j[0].Kind, j[0].Key)
	// Output:
	// 200 1001 new: true
	// 200 1001 new: false
	// effects: 1 hubspot.upsert act-7
}
