package chart_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// grant is one permission of a ServiceAccount, as the chart's RBAC gives
// it: a verb on a resource of a group, optionally for one name only, in
// one namespace (a Role) or everywhere (a ClusterRole bound cluster-wide).
type grant struct {
	Group        string
	Resource     string
	Verb         string
	ResourceName string // "" any
	Namespace    string // "" cluster-wide
}

func (g grant) String() string {
	s := fmt.Sprintf("%s %s/%s", g.Verb, orCore(g.Group), g.Resource)
	if g.ResourceName != "" {
		s += " name=" + g.ResourceName
	}
	if g.Namespace == "" {
		return s + " (cluster-wide)"
	}
	return s + " in " + g.Namespace
}

func orCore(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// allows reports whether the grant lets the call through, as the RBAC
// authorizer decides it.
func (g grant) allows(c apiCall) bool {
	return g.Group == c.Group && g.Resource == c.Resource && g.Verb == c.Verb &&
		(g.ResourceName == "" || g.ResourceName == c.Name) &&
		(g.Namespace == "" || g.Namespace == c.Namespace)
}

// grantsOf expands the rendered Roles, ClusterRoles and their bindings into
// the grants of one ServiceAccount.
func grantsOf(t testing.TB, objs []*unstructured.Unstructured, namespace, serviceAccount string) []grant {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{}
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	var out []grant
	add := func(rules []rbacv1.PolicyRule, ns string) {
		for _, r := range rules {
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						for _, n := range names {
							out = append(out, grant{Group: g, Resource: res, Verb: v, ResourceName: n, Namespace: ns})
						}
					}
				}
			}
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role":
			var r rbacv1.Role
			mustConvert(t, o, &r)
			roles[r.Namespace+"/"+r.Name] = r.Rules
		case "ClusterRole":
			var r rbacv1.ClusterRole
			mustConvert(t, o, &r)
			clusterRoles[r.Name] = r.Rules
		}
	}
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Name == serviceAccount && s.Namespace == namespace
		})
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "RoleBinding":
			var b rbacv1.RoleBinding
			mustConvert(t, o, &b)
			if !bound(b.Subjects) {
				continue
			}
			if b.RoleRef.Kind == "Role" {
				add(roles[b.Namespace+"/"+b.RoleRef.Name], b.Namespace)
			} else {
				add(clusterRoles[b.RoleRef.Name], b.Namespace)
			}
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			mustConvert(t, o, &b)
			if bound(b.Subjects) {
				add(clusterRoles[b.RoleRef.Name], "")
			}
		}
	}
	return out
}

func mustConvert(t testing.TB, o *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
		t.Fatalf("convert %s %s: %v", o.GetKind(), o.GetName(), err)
	}
}

// authorized expands what the API server authorizes for a call: a patch
// (server-side apply) that created its object was also authorized as a
// create, and needed that permission too.
func authorized(c apiCall) []apiCall {
	out := []apiCall{c}
	if c.Verb == "patch" && c.Code == 201 {
		create := c
		create.Verb, create.Name = "create", ""
		out = append(out, create)
	}
	return out
}

// checkLeastPrivilege checks a component's recorded calls against the
// grants of its ServiceAccount, both ways:
//
//   - no call was forbidden, and every resource call is allowed by a grant
//     of the chart (not only by Kubernetes' default roles);
//   - every grant was needed by some call (unless unexercised names it with
//     the reason), and every cluster-wide grant by a call outside the
//     release's namespace, so that it could not have been a Role.
//
// Non-resource calls (discovery) are allowed to every authenticated user by
// Kubernetes' default roles and are not the chart's business.
func checkLeastPrivilege(t *testing.T, calls []apiCall, grants []grant, unexercised map[grant]string) {
	t.Helper()
	used := map[grant]bool{}
	usedElsewhere := map[grant]bool{}
	for _, c := range calls {
		if c.NonResource {
			continue
		}
		if !assert.NotEqual(t, 403, c.Code, "forbidden: %s", c) {
			continue
		}
		for _, a := range authorized(c) {
			ok := false
			for _, g := range grants {
				if g.allows(a) {
					ok = true
					used[g] = true
					if a.Namespace != releaseNamespace {
						usedElsewhere[g] = true
					}
				}
			}
			assert.True(t, ok, "no grant of the chart allows %s", a)
		}
	}
	for _, g := range grants {
		if reason, ok := unexercised[g]; ok {
			if !used[g] {
				t.Logf("granted without a call in this run: %s: %s", g, reason)
			}
			continue
		}
		assert.True(t, used[g], "granted but never needed: %s", g)
		if used[g] && g.Namespace == "" {
			assert.True(t, usedElsewhere[g], "granted cluster-wide but only needed in %s (make it a Role): %s", releaseNamespace, g)
		}
	}
	t.Logf("calls:\n%s", summary(calls))
	if t.Failed() {
		var gs []string
		for _, g := range grants {
			gs = append(gs, g.String())
		}
		t.Logf("grants:\n%s", strings.Join(gs, "\n"))
	}
}

// TestUsersRolesTakeInTheCRDs: with aggregateToDefaultRoles (the default),
// Kubernetes' view role reads Functions, Subscriptions and APIRules, and
// edit and admin also change them (the aggregation labels, which the
// controller manager follows: e2e/cluster TestAnotherNamespaceGetsNothingOfA
// lists A's Functions as A's edit user); without it, no such role.
func TestUsersRolesTakeInTheCRDs(t *testing.T) {
	roles := func(vals map[string]any) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, o := range render(t, vals) {
			if o.GetKind() == "ClusterRole" && (strings.HasSuffix(o.GetName(), "kfn-view") || strings.HasSuffix(o.GetName(), "kfn-edit")) {
				out[o.GetName()] = o
			}
		}
		return out
	}
	got := roles(nil)
	if !assert.Len(t, got, 2) {
		return
	}
	rules := func(o *unstructured.Unstructured) []rbacv1.PolicyRule {
		var r rbacv1.ClusterRole
		assert.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
		return r.Rules
	}
	aggregated := func(o *unstructured.Unstructured) []string {
		var to []string
		for _, role := range []string{"view", "edit", "admin"} {
			if o.GetLabels()["rbac.authorization.k8s.io/aggregate-to-"+role] == "true" {
				to = append(to, role)
			}
		}
		return to
	}
	for name, o := range got {
		want, verbs := []string{"edit", "admin"}, []string{"create", "update", "patch", "delete", "deletecollection"}
		if strings.HasSuffix(name, "-view") {
			want, verbs = []string{"view", "edit", "admin"}, []string{"get", "list", "watch"}
		}
		assert.Equal(t, want, aggregated(o), name)
		resources := map[string]bool{}
		for _, r := range rules(o) {
			assert.Equal(t, verbs, r.Verbs, "%s: %v", name, r.Resources)
			for _, res := range r.Resources {
				resources[r.APIGroups[0]+"/"+res] = true
			}
		}
		for _, res := range []string{"serverless.kyma-project.io/functions", "eventing.kyma-project.io/subscriptions", "gateway.kyma-project.io/apirules"} {
			assert.True(t, resources[res], "%s: %s", name, res)
		}
	}
	assert.Empty(t, roles(map[string]any{"aggregateToDefaultRoles": false}))
}
