package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// standIn is a scripted stand-in for the Messages API on loopback. Each
// request takes the next step of the script: an error status, a dropped
// connection, or the model's answer computed from the request.
type standIn struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	steps []step
	reqs  []apiRequest
}

// step is one scripted answer. Exactly one of status, drop and answer is set.
type step struct {
	status int  // an error answer (408, 429, 500, 529, ...)
	drop   bool // close the connection without answering
	// answer is the model's reply: content blocks and the stop reason.
	answer func(req apiRequest) (content []map[string]any, stop string)
}

// apiRequest is what the stand-in reads of a Messages request.
type apiRequest struct {
	Raw      string
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// toolResult is a tool_result block of a request.
type toolResult struct {
	ToolUseID string
	Text      string
	IsError   bool
}

// results returns the tool_result blocks of the request's last message.
func (r apiRequest) results() []toolResult {
	if len(r.Messages) == 0 {
		return nil
	}
	var blocks []struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	if json.Unmarshal(r.Messages[len(r.Messages)-1].Content, &blocks) != nil {
		return nil
	}
	var out []toolResult
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		res := toolResult{ToolUseID: b.ToolUseID, IsError: b.IsError}
		var text string
		var parts []struct{ Text string }
		if json.Unmarshal(b.Content, &text) == nil {
			res.Text = text
		} else if json.Unmarshal(b.Content, &parts) == nil {
			for _, p := range parts {
				res.Text += p.Text
			}
		}
		out = append(out, res)
	}
	return out
}

func newStandIn(t *testing.T, steps ...step) *standIn {
	s := &standIn{t: t, steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *standIn) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"no such route"}}`, http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	req.Raw = string(body)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	var st step
	if n <= len(s.steps) {
		st = s.steps[n-1]
	}
	s.mu.Unlock()
	switch {
	case st.drop:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	case st.status != 0:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After-Ms", "0") // keep the SDK's retries fast
		w.WriteHeader(st.status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"scripted %d"}}`, st.status)
	case st.answer != nil:
		content, stop := st.answer(req)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 10},
		})
	default:
		s.t.Errorf("stand-in: request %d beyond the script", n)
		http.Error(w, `{"type":"error","error":{"type":"api_error","message":"beyond the script"}}`, http.StatusBadRequest)
	}
}

// requests returns the requests received so far.
func (s *standIn) requests() []apiRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]apiRequest(nil), s.reqs...)
}

// callTool is a model answer that calls one tool.
func callTool(id, name, input string) step {
	return step{answer: func(apiRequest) ([]map[string]any, string) {
		return []map[string]any{
			{"type": "text", "text": "Let me do that."},
			{"type": "tool_use", "id": id, "name": name, "input": json.RawMessage(input)},
		}, "tool_use"
	}}
}

// say is a final model answer.
func say(text string) step {
	return step{answer: func(apiRequest) ([]map[string]any, string) {
		return []map[string]any{{"type": "text", "text": text}}, "end_turn"
	}}
}
