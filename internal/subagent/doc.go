// Package subagent is the delegation seam: an agent hands a task to a
// child agent and gets the child's final answer back.
//
// # Service and providers
//
// [Service] is a registry of named [Provider]s (several coexist: the
// in-process "spawn" and "fork" providers here, later subprocess or
// product backends). [Service.Start] rejects, before anything starts, a
// request for an unknown provider, one needing a capability the provider
// does not declare (UNSUPPORTED_CAPABILITY), and one whose child would be
// deeper than the delegation cap (DEPTH_EXCEEDED). It then starts the
// run, appends subagent/start to the parent's log, observes the result
// and appends the paired subagent/end, whoever waits for it. Both events
// are log-only: they never reach model history.
//
// Delegation depth is the durable [session.Header.DelegationDepth]: 0 for
// a top-level session, parent + 1 for a child. The cap is the service's
// (default 3, configurable; 0 forbids delegation), and a request may only
// lower it.
//
// # One-shot in-process children
//
// [Spawn] and [Fork] create a child through a [Factory], which the
// composition root implements because only it knows how to wire an agent
// (model route, tools, prompt, permissions). The provider appends
// subagent/descriptor {version 2, mode one-shot} to the child's log, queues
// the prompt and runs the child to completion in the background of the
// returned [Run]. Fork seeds the child with the parent's events up to and
// including its last turn/end, so the parent's in-flight turn is never
// part of the child's history.
//
// # What a Factory must do
//
// NewChild returns an idle child over a fresh log; the package owns the
// rules and checks them. [NewChildLog] builds the log as required (the
// header of [ChildHeader], the fork seed as leading events, then
// session/end-seed first); construct the agent right after it. Then:
//
//   - Delegated permission: apply ChildSpec.Permission with
//     [ApplyPermission] and wire the permission machinery over the
//     child's own log (read-only and workspace-write children keep the
//     parent's sandbox mode with approval "never"; auto children are
//     reviewed call by call; full access stays full access).
//   - Tools: the parent preset's global tools, filtered by
//     ChildSpec.Tools, plus every ChildSpec.ExtraTools definition (never
//     filtered); delegation tools resolve the child's own log.
//   - Route: ChildSpec.Provider, Model and Effort, "" meaning the
//     parent's; an unknown route is an error from NewChild.
//   - Prompt: ChildSpec.Persona, when set, replaces the deployment persona.
//   - Close flushes the child's log and drops it from any registry; it is
//     called once, after the run ended.
//
// Spawn, Fork and the continuable manager run [CheckChild] on what
// NewChild returns (header fields, seed, end-seed position, an idle agent
// over that log) and refuse a wrong child with FACTORY_INVALID. NewChild
// runs synchronously inside Start, and nobody else may run the agent: the
// provider owns it until Close.
//
// # Structured output
//
// A request with an OutputSchema gives the child one extra tool,
// structured_output, whose parameters are the schema. The first call
// whose arguments validate ([schema.Schema.Validate]) and whose result is
// committed to the child's log becomes [Result.Structured] and concludes
// the child's turn; an invalid call gets an error result naming what is
// wrong, so the child can retry. A child that ends its turn without a
// valid call is reminded once; if it still has none, the run stops with
// StopReason "error".
//
// # Continuable children
//
// [Manager] runs continuable children (the default mode of the subagent
// tools in dsh's profile): the call returns the child's id at once, the
// child's log starts with a continuable descriptor, at most one
// activation per child runs, and when it settles (after its own
// continuable children have settled) exactly one notice reaches the
// direct parent. send_message continues a child (steering a running one,
// waking an idle one, cold-resuming an inactive one through
// [ResumeFactory]); interrupt_agent stops an ancestor's descendant's turn
// and keeps its queue. Background one-shot runs are jobs (see the
// run_in_background option of [ToolOptions]); listing lives in the
// catalog subpackage.
package subagent
