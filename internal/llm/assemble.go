package llm

import "strings"

// Assembler folds a chunk stream into an assistant message's blocks. It
// is not safe for concurrent use; one assembler serves one model call.
type Assembler struct {
	blocks []*partial // by stream index, in first-seen order
	byIdx  map[int]*partial
	usage  Usage
	seen   bool // a usage chunk arrived
	finish *Finish
}

type partial struct {
	typ      BlockType
	text     strings.Builder
	sig      strings.Builder
	id, name string
	args     strings.Builder
	final    *Block
}

// Add folds one chunk.
func (a *Assembler) Add(c Chunk) {
	if a.byIdx == nil {
		a.byIdx = map[int]*partial{}
	}
	get := func(t BlockType) *partial {
		p := a.byIdx[c.Index]
		if p == nil {
			p = &partial{typ: t}
			a.byIdx[c.Index] = p
			a.blocks = append(a.blocks, p)
		}
		return p
	}
	switch c.Type {
	case ChunkBlockStart:
		get(c.BlockType)
	case ChunkTextDelta:
		get(BlockText).text.WriteString(c.Text)
	case ChunkReasoningDelta:
		p := get(BlockReasoning)
		p.text.WriteString(c.Text)
		p.sig.WriteString(c.Signature)
	case ChunkToolCallDelta:
		p := get(BlockToolCall)
		if c.ID != "" {
			p.id = c.ID
		}
		if c.Name != "" {
			p.name = c.Name
		}
		p.args.WriteString(c.ArgumentsDelta)
	case ChunkBlockEnd:
		if c.Block != nil {
			b := *c.Block
			get(b.Type).final = &b
		}
	case ChunkUsage:
		if c.Usage != nil {
			a.usage = *c.Usage
			a.seen = true
		}
	case ChunkFinish:
		a.finish = c.Finish
	}
}

// Usage returns the call's usage and whether any was reported.
func (a *Assembler) Usage() (Usage, bool) { return a.usage, a.seen }

// Finish returns the finish chunk's payload, or nil if none arrived.
func (a *Assembler) Finish() *Finish { return a.finish }

// Blocks returns the assembled blocks in stream order. Empty text and
// reasoning blocks are dropped. After a max-tokens finish every tool call
// is dropped: a truncated call must never execute.
func (a *Assembler) Blocks() []Block {
	dropCalls := a.finish != nil && a.finish.Reason == FinishMaxTokens
	var out []Block
	for _, p := range a.blocks {
		b := p.block()
		switch b.Type {
		case BlockText, BlockReasoning:
			if b.Text == "" && b.Signature == "" {
				continue
			}
		case BlockToolCall:
			if dropCalls {
				continue
			}
		}
		out = append(out, b)
	}
	return out
}

// InterruptedBlocks returns only the non-empty text and reasoning blocks:
// what a user saw of a cancelled stream.
func (a *Assembler) InterruptedBlocks() []Block {
	var out []Block
	for _, p := range a.blocks {
		b := p.block()
		if (b.Type == BlockText || b.Type == BlockReasoning) && b.Text != "" {
			out = append(out, b)
		}
	}
	return out
}

func (p *partial) block() Block {
	if p.final != nil {
		return *p.final
	}
	switch p.typ {
	case BlockToolCall:
		return Block{Type: BlockToolCall, ID: p.id, Name: p.name, Arguments: p.args.String()}
	case BlockReasoning:
		return Block{Type: BlockReasoning, Text: p.text.String(), Signature: p.sig.String()}
	default:
		return Block{Type: p.typ, Text: p.text.String()}
	}
}
