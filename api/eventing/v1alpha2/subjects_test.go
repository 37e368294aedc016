package v1alpha2_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/kfn-dev/kfn/api/eventing/v1alpha2"
)

func subscription(matching TypeMatching, source string, types ...string) *Subscription {
	return &Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
		Spec:       SubscriptionSpec{TypeMatching: matching, Source: source, Types: types, Sink: "http://fn.default.svc.cluster.local"},
	}
}

func TestCleanSource(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":                {"myapp", "myapp"},
		"dots removed":         {"my.app", "myapp"},
		"slashes removed":      {"/default/sap.kyma/tunas", "defaultsapkymatunas"},
		"backslash":            {`a\b`, "ab"},
		"wildcards":            {"a*b>c", "abc"},
		"whitespace":           {" a b\tc\n", "abc"},
		"other chars kept":     {"app-1_x:y", "app-1_x:y"},
		"uri source":           {"https://example.com/orders", "https:examplecomorders"},
		"empty stays empty":    {"", ""},
		"only removable chars": {"/", ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, CleanSource(tt.in))
		})
	}
}

func TestCleanEventType(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":            {"order.created.v1", "order.created.v1"},
		"dots kept":        {"a.b.c.d", "a.b.c.d"},
		"wildcards":        {"order.*.v1", "order..v1"},
		"gt":               {"order.created>.v1", "order.created.v1"},
		"slashes":          {"order/created\\x.v1", "ordercreatedx.v1"},
		"whitespace":       {" order.created .v1", "order.created.v1"},
		"dash, underscore": {"order-x.created_y.v1", "order-x.created_y.v1"},
		"kyma's tutorial":  {"order.payment*success.v1", "order.paymentsuccess.v1"},
		"only those five":  {"order!#.créé<%@.v1", "order!#.créé<%@.v1"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, CleanEventType(tt.in))
		})
	}
}

func TestEventSubject(t *testing.T) {
	tests := map[string]struct {
		source, typ, want string
		wantErr           bool
	}{
		"standard":                      {source: "myapp", typ: "order.created.v1", want: "kyma.myapp.order.created.v1"},
		"source cleaned":                {source: "/shop/orders", typ: "order.created.v1", want: "kyma.shoporders.order.created.v1"},
		"type cleaned":                  {source: "app", typ: "order created.v1", want: "kyma.app.ordercreated.v1"},
		"empty source token":            {source: "/", typ: "order.created.v1", want: "kyma._.order.created.v1"},
		"single segment type":           {source: "app", typ: "ping", want: "kyma.app.ping"},
		"empty type":                    {source: "app", typ: "", wantErr: true},
		"type cleans to empty":          {source: "app", typ: "**", wantErr: true},
		"empty segment":                 {source: "app", typ: "order..v1", wantErr: true},
		"segment cleaned away":          {source: "app", typ: "order.*.v1", wantErr: true},
		"longest type":                  {source: "app", typ: longType(MaxEventTypeLength), want: "kyma.app." + longType(MaxEventTypeLength)},
		"type too long":                 {source: "app", typ: longType(MaxEventTypeLength + 1), wantErr: true},
		"type too long before cleaning": {source: "app", typ: longType(MaxEventTypeLength) + " ", wantErr: true},
		"longest source":                {source: strings.Repeat("s", MaxEventSourceLength), typ: "a.b", want: "kyma." + strings.Repeat("s", MaxEventSourceLength) + ".a.b"},
		"source too long":               {source: strings.Repeat("s", MaxEventSourceLength+1), typ: "a.b", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := EventSubject(tt.source, tt.typ)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidEventType)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestFilterSubjects(t *testing.T) {
	tests := map[string]struct {
		sub  *Subscription
		want []string
	}{
		"standard": {
			sub:  subscription(TypeMatchingStandard, "my.app", "order.created.v1", "order.updated.v1"),
			want: []string{"kyma.myapp.order.created.v1", "kyma.myapp.order.updated.v1"},
		},
		"standard is the default": {
			sub:  subscription("", "app", "order.created.v1"),
			want: []string{"kyma.app.order.created.v1"},
		},
		"exact names the source in the type": {
			sub:  subscription(TypeMatchingExact, "", "shop.order.created.v1"),
			want: []string{"kyma.shop.order.created.v1"},
		},
		"exact legacy type, from any source too": {
			sub:  subscription(TypeMatchingExact, "", "sap.kyma.custom.commerce.order.created.v1"),
			want: []string{"kyma.sap.kyma.custom.commerce.order.created.v1", "kyma.*.sap.kyma.custom.commerce.order.created.v1"},
		},
		"exact subjects never overlap": {
			sub:  subscription(TypeMatchingExact, "", "sap.kyma.custom.commerce.order.created.v1", "x.sap.kyma.custom.commerce.order.created.v1"),
			want: []string{"kyma.sap.kyma.custom.commerce.order.created.v1", "kyma.*.sap.kyma.custom.commerce.order.created.v1"},
		},
		"exact type with a slash matches nothing": {
			sub:  subscription(TypeMatchingExact, "", "shop/orders.created.v1"),
			want: []string{"kyma.shop/orders.created.v1"},
		},
		"types that clean alike share a subject": {
			sub:  subscription(TypeMatchingStandard, "app", "order.created.v1", "order/created.v1", "ordercreated.v1"),
			want: []string{"kyma.app.order.created.v1", "kyma.app.ordercreated.v1"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tt.sub.FilterSubjects()
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	for _, sub := range []*Subscription{
		subscription(TypeMatchingStandard, "app", "order..v1"),
		subscription(TypeMatchingExact, "", "shop.order..v1"),
		subscription(TypeMatchingExact, "", "shop.order.*"),
		subscription(TypeMatchingExact, "", "shop.order.>"),
		subscription(TypeMatchingExact, "", "shop.order created.v1"),
		subscription(TypeMatchingStandard, "app", longType(MaxEventTypeLength+1)),
		subscription(TypeMatchingExact, "", longType(MaxEventTypeLength+1)),
		subscription(TypeMatchingStandard, strings.Repeat("s", MaxEventSourceLength+1), "a.b"),
	} {
		_, err := sub.FilterSubjects()
		require.ErrorIs(t, err, ErrInvalidEventType, "%v", sub.Spec.Types)
	}
}

// longType is an event type of n bytes, in segments of up to 63.
func longType(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len()%64 == 63 && b.Len() < n-1 {
			b.WriteByte('.')
			continue
		}
		b.WriteByte('a')
	}
	return b.String()
}

// TestSubjectsRoundTrip checks that an event's subject is one the matching
// Subscription's consumer filters on, for both matching modes.
func TestSubjectsRoundTrip(t *testing.T) {
	for _, sub := range []*Subscription{
		subscription(TypeMatchingStandard, "/shop/orders", "order.created.v1"),
		subscription(TypeMatchingExact, "", "shoporders.order.created.v1"),
	} {
		subject, err := EventSubject("/shop/orders", "order.created.v1")
		require.NoError(t, err)
		filters, err := sub.FilterSubjects()
		require.NoError(t, err)
		assert.True(t, subjectMatches(filters[0], subject), "%s should match %s", filters[0], subject)
		assert.True(t, sub.Matches("/shop/orders", "order.created.v1"))
	}
}

func subjectMatches(filter, subject string) bool {
	f, s := splitTokens(filter), splitTokens(subject)
	if len(f) != len(s) {
		return false
	}
	for i := range f {
		if f[i] != "*" && f[i] != s[i] {
			return false
		}
	}
	return true
}

func splitTokens(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func TestMatches(t *testing.T) {
	standard := subscription(TypeMatchingStandard, "my.app", "order.created.v1")
	exact := subscription(TypeMatchingExact, "", "myapp.order.created.v1")
	legacy := subscription(TypeMatchingExact, "", "sap.kyma.custom.shop.order.created.v1")
	tests := map[string]struct {
		sub          *Subscription
		source, typ  string
		wantMatching bool
	}{
		"standard, same":                {standard, "my.app", "order.created.v1", true},
		"standard, source cleans alike": {standard, "myapp", "order.created.v1", true},
		"standard, other source":        {standard, "other", "order.created.v1", false},
		"standard, other type":          {standard, "my.app", "order.deleted.v1", false},
		"standard, type cleans alike":   {standard, "my.app", "order.created .v1", true},
		"standard, collision as Kyma's": {subscription(TypeMatchingStandard, "app", "system>prod.v1"), "app", "systemprod.v1", true},
		"exact, source and type":        {exact, "myapp", "order.created.v1", true},
		"exact, stored form":            {exact, "my.app", "order.created .v1", true},
		"exact, other source":           {exact, "anything", "order.created.v1", false},
		"exact, the type alone":         {exact, "myapp", "myapp.order.created.v1", false},
		"exact, split elsewhere":        {exact, "myapp.order", "created.v1", false},
		"exact legacy, any source":      {legacy, "anything", "sap.kyma.custom.shop.order.created.v1", true},
		"exact legacy, identical only":  {legacy, "anything", "sap.kyma.custom.shop.order.created.v1*", false},
		"exact legacy, as source+type":  {legacy, "sap", "kyma.custom.shop.order.created.v1", true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.wantMatching, tt.sub.Matches(tt.source, tt.typ))
		})
	}
}

func TestCleanTypes(t *testing.T) {
	got := subscription(TypeMatchingStandard, "app", "order created.v1", "order.updated.v1").CleanTypes()
	assert.Equal(t, []EventType{
		{OriginalType: "order created.v1", CleanType: "ordercreated.v1"},
		{OriginalType: "order.updated.v1", CleanType: "order.updated.v1"},
	}, got)
	got = subscription(TypeMatchingExact, "", "order created.v1").CleanTypes()
	assert.Equal(t, []EventType{{OriginalType: "order created.v1", CleanType: "order created.v1"}}, got)
	assert.NotNil(t, (&Subscription{}).CleanTypes(), "status.types is never null")
}

func TestLegacyEventType(t *testing.T) {
	tests := map[string]struct {
		prefix, app, event, version, want string
	}{
		"plain":               {DefaultLegacyPrefix, "commerce", "order.created", "v1", "sap.kyma.custom.commerce.order.created.v1"},
		"app name cleaned":    {DefaultLegacyPrefix, "my_app-1", "order.created", "v1", "sap.kyma.custom.myapp1.order.created.v1"},
		"event cleaned":       {DefaultLegacyPrefix, "app", "order-item.created!", "v2", "sap.kyma.custom.app.orderitem.created.v2"},
		"no prefix":           {"", "app", "order.created", "v1", "app.order.created.v1"},
		"blank prefix":        {"  ", "app", "order.created", "v1", "app.order.created.v1"},
		"unicode app removed": {DefaultLegacyPrefix, "äpp", "order.created", "v1", "sap.kyma.custom.pp.order.created.v1"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tt.want, LegacyEventType(tt.prefix, tt.app, tt.event, tt.version))
		})
	}
}

func TestParseAndCleanLegacyEventType(t *testing.T) {
	tests := map[string]struct {
		prefix, in, want string
		wantErr          bool
	}{
		"four segments":            {prefix: DefaultLegacyPrefix, in: "sap.kyma.custom.commerce.order.created.v1", want: "sap.kyma.custom.commerce.order.created.v1"},
		"business object combined": {prefix: DefaultLegacyPrefix, in: "sap.kyma.custom.commerce.sales.order.created.v1", want: "sap.kyma.custom.commerce.salesorder.created.v1"},
		"app cleaned":              {prefix: DefaultLegacyPrefix, in: "sap.kyma.custom.my_app.order.created.v1", want: "sap.kyma.custom.myapp.order.created.v1"},
		"segments cleaned":         {prefix: DefaultLegacyPrefix, in: "sap.kyma.custom.app.order-x.created.v1", want: "sap.kyma.custom.app.orderx.created.v1"},
		"no prefix configured":     {prefix: "", in: "app.order.created.v1", want: "app.order.created.v1"},
		"missing prefix":           {prefix: DefaultLegacyPrefix, in: "other.app.order.created.v1", wantErr: true},
		"too few segments":         {prefix: DefaultLegacyPrefix, in: "sap.kyma.custom.app.created.v1", wantErr: true},
		"empty segment":            {prefix: DefaultLegacyPrefix, in: "sap.kyma.custom.app..created.v1", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			app, event, version, err := ParseLegacyEventType(tt.prefix, tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidEventType)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, LegacyEventType(tt.prefix, app, event, version))
		})
	}
}

func FuzzEventSubject(f *testing.F) {
	f.Add("myapp", "order.created.v1")
	f.Add("/", "a..b")
	f.Add("a b*>", "x/y\\z.v1")
	f.Fuzz(func(t *testing.T, source, typ string) {
		subject, err := EventSubject(source, typ)
		if err != nil {
			return
		}
		for _, tok := range splitTokens(subject) {
			if tok == "" || tok == "*" || tok == ">" {
				t.Fatalf("subject %q of (%q, %q) has an invalid token", subject, source, typ)
			}
		}
		for _, r := range subject {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				t.Fatalf("subject %q has whitespace", subject)
			}
		}
	})
}

// TestExactMatchingAsKyma checks exact matching against Kyma's semantics,
// rebuilt here from upstream: eventing-publisher-proxy stores an event with
// a legacy-prefixed type under kyma.<type> and any other under
// kyma.<clean source>.<clean type> (refusing one whose subject has an empty
// segment), and eventing-manager's JetStream backend filters an exact type
// on kyma.<type>, delivering whatever that subject holds. For every pair of
// event and exact Subscription type, kfn delivers (its filter subjects
// select the event's subject and Matches accepts it) exactly when Kyma does.
func TestExactMatchingAsKyma(t *testing.T) {
	kymaSubject := func(source, typ string) string {
		if strings.HasPrefix(typ, "sap.kyma.custom.") {
			return "kyma." + typ
		}
		s := "kyma." + CleanSource(source) + "." + CleanEventType(typ)
		if slices.Contains(strings.Split(s, "."), "") {
			return ""
		}
		return s
	}
	sources := []string{"shop", "/shop", "my.shop", "myshop", "sap", "kyma", "other", "shop.order"}
	types := []string{
		"order.created.v1", "order created.v1", "order/created.v1", "created.v1", "shop.order.created.v1",
		"kyma.custom.shop.order.created.v1", "sap.kyma.custom.shop.order.created.v1", "sap.kyma.custom.other.order.created.v1",
	}
	exactTypes := []string{
		"shop.order.created.v1", "myshop.order.created.v1", "shop.ordercreated.v1", "shoporder.created.v1",
		"sap.kyma.custom.shop.order.created.v1", "shop.shop.order.created.v1", "other.sap.kyma.custom.shop.order.created.v1",
		"order.created.v1", "shop/x.order.created.v1",
	}
	delivered := 0
	for _, exactType := range exactTypes {
		sub := subscription(TypeMatchingExact, "", exactType)
		filters, err := sub.FilterSubjects()
		require.NoError(t, err)
		for _, source := range sources {
			for _, typ := range types {
				stored := kymaSubject(source, typ)
				if stored == "" {
					continue // Kyma refuses the event
				}
				kyma := stored == "kyma."+exactType
				subject, err := EventSubject(source, typ)
				require.NoError(t, err)
				selected := slices.ContainsFunc(filters, func(f string) bool { return subjectMatches(f, subject) })
				kfn := selected && sub.Matches(source, typ)
				assert.Equal(t, kyma, kfn, "exact type %q, event source %q type %q (Kyma subject %s, kfn subject %s, filters %v)",
					exactType, source, typ, stored, subject, filters)
				if kfn {
					delivered++
				}
			}
		}
	}
	assert.Equal(t, 20, delivered, "events delivered over the whole table")
}
