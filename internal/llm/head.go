package llm

import (
	"bytes"
	"slices"
)

// Head is what a request is encoded from besides its messages (model,
// system prompt, tools, options). An adapter keeps the head of the last
// request it encoded with its encoding, so that the next request of the
// conversation, whose head is nearly always the same, is recognised
// without encoding the system prompt and tool schemas (tens of KiB)
// again. TestHeadCoversRequest fails when Request gains a field that
// Head does not account for.
type Head struct {
	set       bool
	model     string
	system    string
	tools     []ToolSchema
	effort    Effort
	maxTokens int
	hasTemp   bool
	temp      float64
}

// HeadOf returns req's head, holding copies of what the caller may reuse
// (the tool list, the temperature).
func HeadOf(req Request) Head {
	h := Head{set: true, model: req.Model, system: req.System, tools: slices.Clone(req.Tools),
		effort: req.Effort, maxTokens: req.MaxTokens}
	if req.Temperature != nil {
		h.hasTemp, h.temp = true, *req.Temperature
	}
	return h
}

// Same reports whether req's head is h (false for the zero Head).
func (h Head) Same(req Request) bool {
	if !h.set || h.model != req.Model || h.system != req.System || h.effort != req.Effort || h.maxTokens != req.MaxTokens ||
		h.hasTemp != (req.Temperature != nil) || (h.hasTemp && h.temp != *req.Temperature) {
		return false
	}
	return SameTools(h.tools, req.Tools)
}

// SameTools reports whether two tool lists hold the same schemas in the
// same order, so that they encode to the same JSON.
func SameTools(a, b []ToolSchema) bool {
	return slices.EqualFunc(a, b, func(x, y ToolSchema) bool {
		return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.Parameters, y.Parameters)
	})
}
