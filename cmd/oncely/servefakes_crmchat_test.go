package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// serve-fakes serves the HubSpot and Slack fakes too, with their journals
// and the fault rules addressed to them.
func TestServeFakesHubSpotSlack(t *testing.T) {
	t.Parallel()
	p := start(t, nil, "serve-fakes", "--json",
		"--fault", "fake=slack,route=POST /api/chat.postMessage,attempt=1,action=CommitThenError,status=500")
	urls := decodeJSON[map[string]map[string]string](t, p.line(t))

	upsert := `{"inputs": [{"idProperty": "oncely_key", "id": "k1", "properties": {"email": "lead@example.com"}}]}`
	req, err := http.NewRequest("POST", urls["hubspot"]["url"]+"/crm/v3/objects/contacts/batch/upsert", strings.NewReader(upsert))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer pat-test")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("hubspot upsert: %d", resp.StatusCode)
	}
	_, body := httpDo(t, "GET", urls["hubspot"]["journal"], "")
	if j := decodeJSON[[]effectJSON](t, string(body)); len(j) != 1 || j[0].Kind != "hubspot.upsert" || j[0].Key != "k1" {
		t.Errorf("hubspot journal: %+v", j)
	}

	form := url.Values{"token": {"xoxb-test"}, "channel": {"C0000000001"}, "text": {"hi"},
		"metadata": {`{"event_type": "oncely_action", "event_payload": {"oncely_key": "k2"}}`}}.Encode()
	for _, want := range []int{http.StatusInternalServerError, http.StatusOK} {
		resp, err := http.Post(urls["slack"]["url"]+"/api/chat.postMessage", "application/x-www-form-urlencoded", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("slack post: %d, want %d", resp.StatusCode, want)
		}
	}
	_, body = httpDo(t, "GET", urls["slack"]["journal"], "")
	if j := decodeJSON[[]effectJSON](t, string(body)); len(j) != 2 || j[0].Kind != "slack.message" || j[0].Key != "k2" {
		t.Errorf("slack journal: %+v, want both posts (the first committed before its 500)", j)
	}
}
