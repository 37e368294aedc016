package hostile

import (
	"fmt"
	"regexp"
	"strings"
)

// Event types and sources of the two tenants.
const (
	VictimSource   = "bank"
	VictimType     = "payment.booked.v1"
	AuditType      = "payment.audited.v1"
	AttackerSource = "mallory"
	// Attack types, one per Function of the attacker.
	RedirectType = "spam.redirect.v1"
	DeadType     = "spam.dead.v1"
	SlowType     = "spam.slow.v1"
	ReplyType    = "spam.reply.v1"
	// SpoofType's Function answers with a reply that names the victim's
	// namespace as its sender, with the victim's source and type.
	SpoofType = "spam.spoof.v1"
	// LoopType's Function emits an event of LoopType for each it gets.
	LoopType = "spam.loop.v1"
	// HeaderType's Function answers with a megabyte of headers.
	HeaderType = "spam.headers.v1"
	// FanoutType has FanoutSubscriptions Subscriptions of the attacker.
	FanoutType = "spam.fanout.v1"
)

// FanoutSubscriptions is how many Subscriptions the attacker makes on
// FanoutType: more than a namespace's limit per event type (20 by
// default), so that the last are not served.
const FanoutSubscriptions = 25

// SpoofPrefix begins the id of every event the spoofer forges as the
// victim's: the victim's ledger must never get one.
const SpoofPrefix = "spoof-"

// LoopLine is what the looper prints for each event it gets, before its id.
const LoopLine = "looper got "

// Tenants are the two namespaces of a hostile test.
type Tenants struct {
	// Victim and Attacker are the namespaces.
	Victim, Attacker string
	// Redirect is where the attacker's redirector points the event
	// bridge, with the event: an address of kfn's own (the dead-letter
	// admin API's replay of the victim's letters) or of another tenant.
	Redirect string
	// Runtime is the Functions' runtime; default nodejs24.
	Runtime string
	// Recorder, when set, is the base URL the victim's ledger also posts
	// {"fn": "ledger", "id": <id>} to, on /record, for each event.
	Recorder string
}

func (t Tenants) runtime() string {
	if t.Runtime == "" {
		return "nodejs24"
	}
	return t.Runtime
}

// function is a Function manifest with an inline Node.js source.
func (t Tenants) function(namespace, name, source string, env map[string]string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: serverless.kyma-project.io/v1alpha2\nkind: Function\nmetadata: {name: %s, namespace: %s}\nspec:\n  runtime: %s\n", name, namespace, t.runtime())
	if len(env) > 0 {
		b.WriteString("  env:\n")
		for k, v := range env {
			fmt.Fprintf(&b, "    - {name: %s, value: %q}\n", k, v)
		}
	}
	b.WriteString(extra)
	b.WriteString("  source:\n    inline:\n      source: |\n")
	for _, line := range strings.Split(strings.TrimSpace(source), "\n") {
		b.WriteString("        " + line + "\n")
	}
	return b.String()
}

// subscription is a Subscription manifest.
func subscription(namespace, name, sink, source, eventType string, config map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: eventing.kyma-project.io/v1alpha2\nkind: Subscription\nmetadata: {name: %s, namespace: %s}\nspec:\n  sink: %s\n  source: %s\n  types: [%s]\n", name, namespace, sink, source, eventType)
	if len(config) > 0 {
		b.WriteString("  config:\n")
		for k, v := range config {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	return b.String()
}

func sink(namespace, name string) string {
	return fmt.Sprintf("http://%s.%s.svc.cluster.local", name, namespace)
}

// Manifests returns the YAML documents of both tenants: Victim's, then
// Attacker's.
func (t Tenants) Manifests() string {
	return t.VictimManifests() + "---\n" + t.AttackerManifests()
}

// VictimManifests returns the YAML documents of the victim: ledger,
// which prints "ledger got <id>" for each event of VictimType (and posts
// it to Recorder), and audit, which refuses every event of AuditType with
// 400 (its dead letters must stay).
func (t Tenants) VictimManifests() string {
	v := t.Victim
	env := map[string]string{}
	if t.Recorder != "" {
		env["RECORDER_URL"] = t.Recorder
	}
	docs := []string{
		t.function(v, "ledger", `
module.exports = {
  main: async function (event, context) {
    console.log("ledger got " + event["ce-id"]);
    if (process.env.RECORDER_URL) {
      await fetch(process.env.RECORDER_URL + "/record", {
        method: "POST", body: JSON.stringify({ fn: "ledger", id: event["ce-id"] }),
      });
    }
    return "";
  },
};`, env, ""),
		subscription(v, "ledger", sink(v, "ledger"), VictimSource, VictimType, nil),
		t.function(v, "audit", `
module.exports = {
  main: function (event, context) {
    event.setResponseStatus(400);
    return "refused";
  },
};`, nil, ""),
		subscription(v, "audit", sink(v, "audit"), VictimSource, AuditType, map[string]string{"maxDeliver": "1"}),
	}
	return strings.Join(docs, "---\n")
}

// AttackerManifests returns the YAML documents of the attacker:
// redirector (307 to Redirect), dead (500; its failures fill the dead
// letters), slow (answers after two minutes; up to 1,000 events in
// flight), replier (answers with a reply whose type NATS would close the
// connection for, and emits one), a Subscription whose sink is the
// victim's ledger (not ready: a sink must be in the Subscription's
// namespace), spoofer (replies as the victim: its namespace as sender,
// its source and type), looper (emits an event of its own type for each
// it gets, for ever were it not for the hop limit; it prints LoopLine and
// the id, and posts {"fn": "looper-<attacker>", "id"} to Recorder),
// headers (answers with a megabyte of headers), and FanoutSubscriptions
// Subscriptions on FanoutType.
func (t Tenants) AttackerManifests() string {
	v, a := t.Victim, t.Attacker
	docs := []string{
		t.function(a, "redirector", `
module.exports = {
  main: function (event, context) {
    event.setResponseStatus(307);
    event.setResponseHeader("Location", process.env.TARGET);
    return "";
  },
};`, map[string]string{"TARGET": t.Redirect}, ""),
		subscription(a, "redirector", sink(a, "redirector"), AttackerSource, RedirectType, map[string]string{"maxDeliver": "1"}),
		t.function(a, "dead", `
module.exports = {
  main: function (event, context) {
    event.setResponseStatus(500);
    return "down";
  },
};`, nil, ""),
		subscription(a, "dead", sink(a, "dead"), AttackerSource, DeadType, map[string]string{"maxDeliver": "1", "maxBacklog": "50"}),
		t.function(a, "slow", `
module.exports = {
  main: function (event, context) {
    return new Promise((resolve) => setTimeout(() => resolve(""), 120000));
  },
};`, map[string]string{"FUNC_TIMEOUT": "180"}, ""),
		subscription(a, "slow", sink(a, "slow"), AttackerSource, SlowType, map[string]string{"maxInFlightMessages": "1000", "maxBacklog": "2000"}),
		t.function(a, "replier", `
module.exports = {
  main: async function (event, context) {
    const long = "a".repeat(5000);
    try {
      await event.emitCloudEvent(long, "mallory", {});
    } catch (e) {
      console.log("emit refused: " + e.message);
    }
    event.setResponseHeader("ce-specversion", "1.0");
    event.setResponseHeader("ce-id", "reply-" + event["ce-id"]);
    event.setResponseHeader("ce-source", "mallory");
    event.setResponseHeader("ce-type", long);
    return "";
  },
};`, nil, ""),
		subscription(a, "replier", sink(a, "replier"), AttackerSource, ReplyType, nil),
		subscription(a, "trespass", sink(v, "ledger"), VictimSource, VictimType, nil),
		t.function(a, "spoofer", fmt.Sprintf(`
module.exports = {
  main: function (event, context) {
    event.setResponseHeader("ce-specversion", "1.0");
    event.setResponseHeader("ce-id", %q + event["ce-id"]);
    event.setResponseHeader("ce-source", %q);
    event.setResponseHeader("ce-type", %q);
    event.setResponseHeader("ce-kfnsendernamespace", %q);
    event.setResponseHeader("content-type", "application/json");
    return {amount: 1000000};
  },
};`, SpoofPrefix, VictimSource, VictimType, v), nil, ""),
		subscription(a, "spoofer", sink(a, "spoofer"), AttackerSource, SpoofType, nil),
		t.function(a, "looper", fmt.Sprintf(`
module.exports = {
  main: async function (event, context) {
    console.log(%q + event["ce-id"]);
    if (process.env.RECORDER_URL) {
      await fetch(process.env.RECORDER_URL + "/record", {
        method: "POST", body: JSON.stringify({ fn: "looper-" + process.env.NAMESPACE, id: event["ce-id"] }),
      });
    }
    // A 429 (the namespace's rate, which the other attacks spend) is
    // tried again, as a producer should: the loop ends at the hop limit.
    for (let attempt = 1; ; attempt++) {
      try {
        await event.emitCloudEvent(%q, %q, {}, { id: event["ce-id"] + "+" });
        break;
      } catch (e) {
        if (attempt < 60 && e.message.includes(" 429 ")) {
          await new Promise((r) => setTimeout(r, 500));
          continue;
        }
        console.log("loop ended: " + e.message);
        break;
      }
    }
    return "";
  },
};`, LoopLine, LoopType, AttackerSource), t.recorderEnv(map[string]string{"NAMESPACE": a}), ""),
		subscription(a, "looper", sink(a, "looper"), AttackerSource, LoopType, nil),
		t.function(a, "headers", `
module.exports = {
  main: function (event, context) {
    for (let i = 0; i < 16; i++) {
      event.setResponseHeader("x-pad-" + i, "x".repeat(64 * 1024));
    }
    return "";
  },
};`, nil, ""),
		subscription(a, "headers", sink(a, "headers"), AttackerSource, HeaderType, map[string]string{"maxDeliver": "1"}),
	}
	for i := range FanoutSubscriptions {
		docs = append(docs, subscription(a, fmt.Sprintf("fanout-%02d", i), sink(a, "dead"), AttackerSource, FanoutType, map[string]string{"maxDeliver": "1"}))
	}
	return strings.Join(docs, "---\n")
}

// recorderEnv is env with RECORDER_URL set to Recorder, when there is one.
func (t Tenants) recorderEnv(env map[string]string) map[string]string {
	if t.Recorder != "" {
		env["RECORDER_URL"] = t.Recorder
	}
	return env
}

// LoopIDs returns the ids the attacker's looper printed in out.
func LoopIDs(out string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if _, id, ok := strings.Cut(line, LoopLine); ok {
			ids = append(ids, strings.TrimSpace(id))
		}
	}
	return ids
}

// Refused are Subscriptions the API (kubectl apply, kfn dev's admission)
// must refuse, by name, with a text of the refusal.
func (t Tenants) Refused() map[string]Manifest {
	a := t.Attacker
	return map[string]Manifest{
		"in-flight": {YAML: subscription(a, "in-flight", sink(a, "dead"), AttackerSource, DeadType, map[string]string{"maxInFlightMessages": "999999999"}), Says: "maxInFlightMessages must be a stringified int value between 1 and 1000"},
		"backlog":   {YAML: subscription(a, "backlog", sink(a, "dead"), AttackerSource, DeadType, map[string]string{"maxBacklog": "999999999"}), Says: "maxBacklog must be a stringified int value between 1 and 1000000"},
		"deliver":   {YAML: subscription(a, "deliver", sink(a, "dead"), AttackerSource, DeadType, map[string]string{"maxDeliver": "999999999"}), Says: "maxDeliver must be a stringified int value between 1 and 100"},
		"long-type": {YAML: subscription(a, "long-type", sink(a, "dead"), AttackerSource, EventType(4200), nil), Says: "types"},
	}
}

// Manifest is one manifest and a text its refusal contains.
type Manifest struct {
	YAML string
	Says string
}

var ledgerGot = regexp.MustCompile(`ledger got (\S+)`)

// LedgerIDs returns the ids the victim's ledger printed in out.
func LedgerIDs(out string) map[string]bool {
	ids := map[string]bool{}
	for _, m := range ledgerGot.FindAllStringSubmatch(out, -1) {
		ids[m[1]] = true
	}
	return ids
}
