package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
)

// ScriptedAPI is a stand-in for the Messages API: a real HTTP server on
// 127.0.0.1 that speaks the API's wire format, for the SDK's own client to
// reach through option.WithBaseURL. Each request to POST /v1/messages
// takes the next step of the script; a request beyond the script is
// answered 400.
type ScriptedAPI struct {
	// URL is the server's base URL, http://127.0.0.1:port.
	URL   string
	srv   *httptest.Server
	mu    sync.Mutex
	steps []Step
	reqs  []Request
}

// Step is one scripted answer: an error status, a dropped connection, or
// else the model's message.
type Step struct {
	// Status, if set, is an error answer (408, 429, 500, 529, ...) with
	// Retry-After-Ms: 0, which the SDK retries at once.
	Status int
	// Drop closes the connection without answering.
	Drop bool
	// Content is the model's message: its content blocks as the API
	// writes them.
	Content []map[string]any
	// StopReason is the message's stop_reason: "tool_use" or "end_turn".
	StopReason string
}

// ToolUse is a tool_use block of a scripted message.
type ToolUse struct {
	// ID is the block's id, like toolu_01.
	ID string
	// Name is the tool's name.
	Name string
	// Input is the tool's input, a JSON object.
	Input string
}

// CallTools is a message that says text and calls tools.
func CallTools(text string, uses ...ToolUse) Step {
	content := []map[string]any{{"type": "text", "text": text}}
	for _, u := range uses {
		content = append(content, map[string]any{"type": "tool_use", "id": u.ID, "name": u.Name, "input": json.RawMessage(u.Input)})
	}
	return Step{Content: content, StopReason: "tool_use"}
}

// Say is a final message: text and no tool call.
func Say(text string) Step {
	return Step{Content: []map[string]any{{"type": "text", "text": text}}, StopReason: "end_turn"}
}

// Request is one request the stand-in received and how it answered.
type Request struct {
	// Raw is the request body.
	Raw string
	// Messages are the request's messages.
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	// Status is the answer's status (0 for a dropped connection).
	Status int
}

// ToolResult is a tool_result block of a request: what the model was told.
type ToolResult struct {
	// ToolUseID is the tool_use block it answers.
	ToolUseID string
	// Text is the result's text.
	Text string
	// IsError is the block's is_error.
	IsError bool
}

// ToolResults returns the tool_result blocks of the request's last message.
func (r Request) ToolResults() []ToolResult {
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
	var out []ToolResult
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		res := ToolResult{ToolUseID: b.ToolUseID, IsError: b.IsError}
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

// NewScriptedAPI starts a stand-in that answers with steps, in order.
// Close it.
func NewScriptedAPI(steps ...Step) *ScriptedAPI {
	s := &ScriptedAPI{steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *ScriptedAPI) Close() { s.srv.Close() }

// Requests returns the requests received so far.
func (s *ScriptedAPI) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

func (s *ScriptedAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		apiError(w, http.StatusNotFound, "not_found_error", "no such route")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad json")
		return
	}
	req.Raw = string(body)
	s.mu.Lock()
	n := len(s.reqs) + 1
	beyond := n > len(s.steps)
	st := Step{Status: http.StatusBadRequest}
	if !beyond {
		st = s.steps[n-1]
	}
	switch {
	case st.Drop:
	case st.Status != 0:
		req.Status = st.Status
	default:
		req.Status = http.StatusOK
	}
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	switch {
	case st.Drop:
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
	case beyond:
		apiError(w, st.Status, "invalid_request_error", fmt.Sprintf("request %d is beyond the script", n))
	case st.Status != 0:
		w.Header().Set("Retry-After-Ms", "0") // keep the SDK's retries fast
		apiError(w, st.Status, errorTypes[st.Status], fmt.Sprintf("scripted %d", st.Status))
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("msg_%02d", n), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": st.Content, "stop_reason": st.StopReason, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 10, "output_tokens": 10},
		})
	}
}

// errorTypes are the API's error types by status; others are api_error.
var errorTypes = map[int]string{429: "rate_limit_error", 529: "overloaded_error"}

// apiError writes an error answer of the Messages API.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	if typ == "" {
		typ = "api_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
