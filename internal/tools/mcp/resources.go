package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/mcp"
	"github.com/dsh-dev/dsh/internal/tool"
	"github.com/dsh-dev/dsh/internal/tools/fs"
)

// Names of the resource tools.
const (
	ListResourcesName = "mcp_list_resources"
	ReadResourceName  = "mcp_read_resource"
)

func (b *Bridge) resourceServer(name string) (*mcp.Server, error) {
	for _, s := range b.servers {
		if s.Name() == name {
			if !s.HasResources() {
				return nil, tool.Errorf(mcp.CodeUnknown, "mcp server %s offers no resources (or is not connected)", name)
			}
			return s, nil
		}
	}
	var names []string
	for _, s := range b.servers {
		if s.HasResources() {
			names = append(names, s.Name())
		}
	}
	return nil, tool.Errorf(mcp.CodeUnknown, "no mcp server %q with resources (servers with resources: %s)", name, strings.Join(names, ", "))
}

type listArgs struct {
	Server string `json:"server,omitempty"`
	Cursor string `json:"cursor,omitempty"`
}

type listOut struct {
	Resources  []mcp.Resource `json:"resources"`
	NextCursor string         `json:"nextCursor,omitempty"`
	// Errors name servers whose listing failed.
	Errors []string `json:"errors,omitempty"`
}

func (b *Bridge) listResources() tool.Definition {
	return tool.Definition{
		Name: ListResourcesName,
		Description: "List the resources (files, records, documents) that connected MCP servers expose. " +
			"Without server, lists the first page of every server with resources; give server and the " +
			"returned nextCursor to page through one server. Read one with mcp_read_resource.",
		Parameters:      json.RawMessage(`{"type":"object","properties":{"server":{"type":"string","description":"MCP server name"},"cursor":{"type":"string","description":"nextCursor of an earlier listing of the same server"}},"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a listArgs
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "arguments: %v", err)
			}
			if a.Cursor != "" && a.Server == "" {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "cursor needs server: a cursor belongs to one server's listing")
			}
			out := listOut{Resources: []mcp.Resource{}}
			if a.Server != "" {
				s, err := b.resourceServer(a.Server)
				if err != nil {
					return tool.Result{}, err
				}
				rs, next, err := s.ListResources(ctx, a.Cursor)
				if err != nil {
					return tool.Result{}, toolError(err)
				}
				out.Resources, out.NextCursor = append(out.Resources, rs...), next
			} else {
				for _, s := range b.servers {
					if !s.HasResources() {
						continue
					}
					rs, next, err := s.ListResources(ctx, "")
					if err != nil {
						if ctx.Err() != nil {
							return tool.Result{}, err
						}
						out.Errors = append(out.Errors, s.Name()+": "+err.Error())
						continue
					}
					out.Resources = append(out.Resources, rs...)
					if next != "" {
						out.Errors = append(out.Errors, s.Name()+": more resources; list again with server "+s.Name()+" and cursor "+next)
					}
				}
			}
			raw, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				return tool.Result{}, err
			}
			return tool.Text(string(raw)), nil
		},
	}
}

type readArgs struct {
	Server string `json:"server"`
	URI    string `json:"uri"`
}

func (b *Bridge) readResource() tool.Definition {
	return tool.Definition{
		Name:            ReadResourceName,
		Description:     "Read one resource of an MCP server by its URI (from mcp_list_resources or a resource link in a tool result).",
		Parameters:      json.RawMessage(`{"type":"object","properties":{"server":{"type":"string","description":"MCP server name"},"uri":{"type":"string","description":"resource URI"}},"required":["server","uri"],"additionalProperties":false}`),
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(ctx context.Context, c *tool.Call) (tool.Result, error) {
			var a readArgs
			if err := json.Unmarshal(c.Arguments, &a); err != nil || a.Server == "" || a.URI == "" {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "server and uri are required")
			}
			s, err := b.resourceServer(a.Server)
			if err != nil {
				return tool.Result{}, err
			}
			contents, err := s.ReadResource(ctx, a.URI)
			if err != nil {
				return tool.Result{}, toolError(err)
			}
			o := b.contentOptions(c)
			var out []llm.Block
			var text []string
			for _, rc := range contents {
				if rc.Blob != nil && rc.Text == "" && o.images && fs.ImageType(rc.Blob) != "" {
					if img, err := fs.PrepareImage(rc.Blob, o.maxImageSide, o.maxImage); err == nil {
						text = append(text, fmt.Sprintf("Resource %s: image %dx%d, %s.", rc.URI, img.Width, img.Height, img.MediaType))
						out = append(out, llm.TextBlock(strings.Join(text, "\n")))
						text = nil
						out = append(out, llm.Block{Type: llm.BlockImage, MediaType: img.MediaType, Data: base64.StdEncoding.EncodeToString(img.Data)})
						continue
					}
				}
				text = append(text, resourceText(rc))
			}
			if len(text) > 0 {
				out = append(out, llm.TextBlock(strings.Join(text, "\n")))
			}
			if len(out) == 0 {
				out = []llm.Block{llm.TextBlock("(the resource is empty)")}
			}
			return tool.Result{Content: out}, nil
		},
	}
}
