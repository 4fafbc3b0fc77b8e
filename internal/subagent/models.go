package subagent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dsh-dev/dsh/internal/llm"
	"github.com/dsh-dev/dsh/internal/tool"
)

// ProviderModels is one LLM provider's advertised models, as
// list_subagent_models shows them.
type ProviderModels struct {
	// Provider is the provider id a delegation's provider field takes.
	Provider string
	// Models are its advertised models, in display order.
	Models []ModelInfo
}

// ModelInfo is one advertised model.
type ModelInfo struct {
	// ID is the model id a delegation's model field takes.
	ID string
	// Efforts are the reasoning efforts the model accepts; empty means
	// the provider sets no effort.
	Efforts []llm.Effort
	// ContextWindow is in tokens; 0 when unknown.
	ContextWindow int
}

var listModelsParameters = json.RawMessage(`{"type":"object","properties":{` +
	`"provider":{"type":"string","description":"Registered LLM provider id. Omit to list providers."},` +
	`"model":{"type":"string","description":"Exact model id to inspect. Requires provider; omit to list that provider's advertised models."}` +
	`},"additionalProperties":false}`)

// NewListModelsTool returns list_subagent_models over catalog, which is
// called on every use so the listing follows configuration changes. The
// catalog is advisory: an unlisted model is reported as such, not as an
// error, because an adapter may accept ids it does not advertise.
func NewListModelsTool(catalog func() []ProviderModels) tool.Definition {
	return tool.Definition{
		Name:            ToolListModels,
		Description:     strings.TrimSpace(listModelsDescription),
		Parameters:      listModelsParameters,
		ConcurrencySafe: func(json.RawMessage) bool { return true },
		Execute: func(_ context.Context, c *tool.Call) (tool.Result, error) {
			var a struct {
				Provider string `json:"provider"`
				Model    string `json:"model"`
			}
			if err := json.Unmarshal(c.Arguments, &a); err != nil {
				return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "provider and model must be strings")
			}
			return listModels(catalog(), strings.TrimSpace(a.Provider), strings.TrimSpace(a.Model))
		},
	}
}

func listModels(cat []ProviderModels, provider, model string) (tool.Result, error) {
	var b strings.Builder
	if provider == "" {
		if model != "" {
			return tool.Result{}, tool.Errorf(tool.CodeInvalidArgs, "model requires provider")
		}
		if len(cat) == 0 {
			return tool.Text("No LLM providers are registered."), nil
		}
		b.WriteString("Providers (use the id as `provider`):\n")
		for _, p := range cat {
			fmt.Fprintf(&b, "- %s (%d advertised models)\n", p.Provider, len(p.Models))
		}
		return tool.Text(strings.TrimRight(b.String(), "\n")), nil
	}
	var prov *ProviderModels
	names := make([]string, len(cat))
	for i := range cat {
		names[i] = cat[i].Provider
		if cat[i].Provider == provider {
			prov = &cat[i]
		}
	}
	if prov == nil {
		return tool.Result{}, tool.Errorf(CodeUnknownProvider, "unknown provider %q; registered providers: %s", provider, orNone(names))
	}
	if model == "" {
		if len(prov.Models) == 0 {
			return tool.Text(fmt.Sprintf("Provider %s advertises no models; it may still accept a model id you know.", provider)), nil
		}
		fmt.Fprintf(&b, "Models of %s (use the id as `model`):\n", provider)
		for _, m := range prov.Models {
			fmt.Fprintf(&b, "- %s%s\n", m.ID, modelDetails(m))
		}
		return tool.Text(strings.TrimRight(b.String(), "\n")), nil
	}
	for _, m := range prov.Models {
		if m.ID == model {
			return tool.Text(fmt.Sprintf("%s/%s%s", provider, m.ID, modelDetails(m))), nil
		}
	}
	return tool.Text(fmt.Sprintf("Model %q is not in the catalog of %s. The catalog is advisory: the provider may still accept it.", model, provider)), nil
}

func modelDetails(m ModelInfo) string {
	var parts []string
	if len(m.Efforts) > 0 {
		efforts := make([]string, len(m.Efforts))
		for i, e := range m.Efforts {
			efforts[i] = string(e)
		}
		parts = append(parts, "reasoning efforts: "+strings.Join(efforts, ", "))
	} else {
		parts = append(parts, "no reasoning effort setting")
	}
	if m.ContextWindow > 0 {
		parts = append(parts, fmt.Sprintf("context window %d tokens", m.ContextWindow))
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
