package pool

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kfn-dev/kfn/api/serverless/v1alpha2"
	"github.com/kfn-dev/kfn/controller/resources"
	"github.com/kfn-dev/kfn/runtimes"
	"github.com/kfn-dev/kfn/runtimes/plan"
)

// Labels of the pool's pods. Every pod of the pool also has
// v1alpha2.LabelManagedBy, so that the controller's cache holds it.
const (
	// LabelShape is on a standby pod: the Shape it serves.
	LabelShape = "kfn.dev/pool-shape"
	// LabelClaimedBy is on a pod the pool gave a Function: the Function's
	// name (the pod then also has the Function's pod labels).
	LabelClaimedBy = "kfn.dev/pool-claimed-by"
	// AnnotationSize, on a namespace, sets the pool size of that
	// namespace (an integer within 0..MaxSize; 0 turns its pools off),
	// instead of Config.Size.
	AnnotationSize = "kfn.dev/warm-pool-size"
)

// Defaults and bounds of Config.
const (
	// MaxSize bounds Config.Size: standby pods per namespace and shape.
	MaxSize = 20
	// MaxShapes bounds the shapes the pool keeps standby pods of in one
	// namespace: Functions of further shapes (each set of resources,
	// timeout or security contexts is one) wake on a new pod, so that a
	// namespace's Functions cannot make the pool run more than
	// MaxShapes*size pods there.
	MaxShapes           = 8
	DefaultClaimTimeout = 10 * time.Second
	DefaultResync       = 30 * time.Second
)

// ErrInvalidConfig is wrapped by New's errors for a bad Config.
var ErrInvalidConfig = errors.New("invalid warm pool configuration")

// Config configures a Pool.
type Config struct {
	// Size is how many standby pods the pool keeps per namespace and
	// shape of Function that scales to zero, unless the namespace says
	// otherwise (AnnotationSize); 0 keeps none where no namespace asks.
	Size int
	// Resources configures the standby pods as it does Function pods.
	Resources resources.Config
	// ClaimTimeout bounds the request that gives a standby pod its
	// Function; a pod that does not answer in time is deleted and the
	// Function wakes on the Deployment path.
	ClaimTimeout time.Duration
	// Resync is how often the pool is compared with what it should be,
	// besides after every change.
	Resync time.Duration
}

// member is a Function the pool serves.
type member struct {
	shape string
	plan  plan.Plan
}

// poolKey is one pool: a namespace and a shape.
type poolKey struct{ namespace, shape string }

// Pool keeps standby pods and gives them to Functions woken from zero.
// Observe and Forget are called by the Function reconciler; Start runs the
// pool (a controller-runtime Runnable, in the leader only).
type Pool struct {
	c     client.Client
	cache cache.Cache
	cfg   Config
	log   logr.Logger
	http  *http.Client
	// key derives each standby pod's token; made at start, never stored.
	key []byte
	// address gives the host:port of a pod's host.
	address func(*corev1.Pod) string

	mu        sync.Mutex
	functions map[types.NamespacedName]member
	// taken are standby pods being given to a Function.
	taken map[types.NamespacedName]bool
	// created are pods made and not seen in the cache yet.
	created map[types.NamespacedName]poolKey
	// made are the UIDs of the standby pods the pool made, by name: a pod
	// of the same name someone else made (after deleting the pool's) is
	// not the pool's.
	made map[types.NamespacedName]types.UID
	// failed says why the last claim for a Function failed.
	failed map[types.NamespacedName]string
	kick   chan struct{}
}

// Option configures a Pool.
type Option func(*Pool)

// WithLogger sets the pool's logger.
func WithLogger(l logr.Logger) Option { return func(p *Pool) { p.log = l } }

// WithAddress sets how the pool reaches a pod's host (default: the pod's
// IP and the function container's port). Tests outside a cluster, whose
// pods have no network of their own, reach a host started beside them.
func WithAddress(f func(*corev1.Pod) string) Option { return func(p *Pool) { p.address = f } }

// New returns a Pool that makes and claims pods with c, watching
// Deployments and pods through cache (whose pods must include those with
// v1alpha2.LabelManagedBy).
func New(c client.Client, cache cache.Cache, cfg Config, opts ...Option) (*Pool, error) {
	if cfg.Size < 0 || cfg.Size > MaxSize {
		return nil, fmt.Errorf("%w: size %d is not within 0..%d", ErrInvalidConfig, cfg.Size, MaxSize)
	}
	if cfg.ClaimTimeout <= 0 {
		cfg.ClaimTimeout = DefaultClaimTimeout
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make the pool's token key: %w", err)
	}
	p := &Pool{
		c: c, cache: cache, cfg: cfg, log: logr.Discard(), key: key,
		http:      &http.Client{Timeout: cfg.ClaimTimeout, Transport: hostTransport()},
		address:   podAddress,
		functions: map[types.NamespacedName]member{},
		taken:     map[types.NamespacedName]bool{},
		created:   map[types.NamespacedName]poolKey{},
		made:      map[types.NamespacedName]types.UID{},
		failed:    map[types.NamespacedName]string{},
		kick:      make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// podAddress is the pod's IP and its function container's port.
func podAddress(pod *corev1.Pod) string {
	port := int32(runtimes.DefaultPort)
	for _, c := range pod.Spec.Containers {
		if c.Name == resources.ContainerFunction && len(c.Ports) > 0 {
			port = c.Ports[0].ContainerPort
		}
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))
}

// Observe records p's plan: the pool serves it when it is Eligible (and
// its namespace's pool size is not 0). It returns why the pool cannot
// serve it, nil when it can.
func (p *Pool) Observe(fn plan.Plan) error {
	key := types.NamespacedName{Namespace: fn.Namespace, Name: fn.Name}
	err := Eligible(fn)
	p.mu.Lock()
	before, had := p.functions[key]
	if err == nil {
		err = p.roomFor(key, Shape(fn, p.cfg.Resources))
	}
	if err != nil {
		delete(p.functions, key)
	} else {
		p.functions[key] = member{shape: Shape(fn, p.cfg.Resources), plan: fn}
	}
	changed := had != (err == nil) || (err == nil && before.shape != p.functions[key].shape)
	p.mu.Unlock()
	if changed {
		p.poke()
	}
	return err
}

// roomFor returns an error wrapping ErrNotPoolable when Function key's
// namespace has MaxShapes shapes pooled and shape is not one of them. p.mu
// is held.
func (p *Pool) roomFor(key types.NamespacedName, shape string) error {
	shapes := map[string]bool{}
	for k, m := range p.functions {
		if k.Namespace == key.Namespace && k != key {
			shapes[m.shape] = true
		}
	}
	if shapes[shape] || len(shapes) < MaxShapes {
		return nil
	}
	return fmt.Errorf("%w: its namespace has standby pods of %d other shapes already (image, resources, timeout, security contexts), the most the pool keeps", ErrNotPoolable, MaxShapes)
}

// ClaimFailure says why the pool could not serve fn's last wake from zero
// on a standby pod although it had one (its host could not load fn: its
// dependencies are not in the dependency cache yet, say), so that fn's
// status can say that it woke on a new pod; "" when the last claim
// succeeded, or none failed.
func (p *Pool) ClaimFailure(fn types.NamespacedName) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed[fn]
}

// Forget drops a deleted Function.
func (p *Pool) Forget(fn types.NamespacedName) {
	p.mu.Lock()
	_, had := p.functions[fn]
	delete(p.functions, fn)
	delete(p.failed, fn)
	p.mu.Unlock()
	if had {
		p.poke()
	}
}

func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// NeedLeaderElection runs the pool in the leader only.
func (p *Pool) NeedLeaderElection() bool { return true }

// Start runs the pool until ctx ends: it deletes the standby pods of an
// earlier leader (whose tokens it cannot know), claims a standby pod for
// every pooled Function whose Deployment is scaled up from zero, deletes
// a claimed pod once its Function's Deployment has a ready pod or is
// scaled to zero, and keeps Size standby pods per pool.
func (p *Pool) Start(ctx context.Context) error {
	if err := p.deleteStandby(ctx); err != nil {
		return err
	}
	inf, err := p.cache.GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		return fmt.Errorf("watch deployments: %w", err)
	}
	nsInf, err := p.cache.GetInformer(ctx, &corev1.Namespace{})
	if err != nil {
		return fmt.Errorf("watch namespaces: %w", err)
	}
	nsReg, err := nsInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Namespace)
			ns, ok2 := newObj.(*corev1.Namespace)
			if ok1 && ok2 && (old.Annotations[AnnotationSize] != ns.Annotations[AnnotationSize] ||
				old.DeletionTimestamp.IsZero() != ns.DeletionTimestamp.IsZero()) {
				p.poke()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch namespaces: %w", err)
	}
	defer func() { _ = nsInf.RemoveEventHandler(nsReg) }()
	// A standby pod that changes (claimed, deleted by someone, evicted)
	// is a reason to look at the pool again: the cache now says so.
	podInf, err := p.cache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	standby := func(obj any) bool {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		return ok && pod.Labels[LabelShape] != ""
	}
	podReg, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			if standby(oldObj) || standby(newObj) {
				p.poke()
			}
		},
		DeleteFunc: func(obj any) {
			if standby(obj) {
				p.poke()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	defer func() { _ = podInf.RemoveEventHandler(podReg) }()
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*appsv1.Deployment)
			d, ok2 := newObj.(*appsv1.Deployment)
			if ok1 && ok2 {
				p.deploymentChanged(ctx, old, d)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watch deployments: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	t := time.NewTicker(p.cfg.Resync)
	defer t.Stop()
	for {
		if err := p.refill(ctx); err != nil && ctx.Err() == nil {
			p.log.Error(err, "refill the warm pool")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-t.C:
		}
	}
}

// deleteStandby deletes every standby pod the cache holds.
func (p *Pool) deleteStandby(ctx context.Context) error {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.HasLabels{LabelShape}); err != nil {
		return fmt.Errorf("list standby pods: %w", err)
	}
	for i := range pods.Items {
		if err := p.c.Delete(ctx, &pods.Items[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete standby pod %s/%s: %w", pods.Items[i].Namespace, pods.Items[i].Name, err)
		}
	}
	return nil
}

// deploymentChanged claims a standby pod for a pooled Function whose
// Deployment was scaled up from zero, and retires its claimed pod once the
// Deployment has a ready pod or is at zero again.
func (p *Pool) deploymentChanged(ctx context.Context, old, d *appsv1.Deployment) {
	name := d.Labels[v1alpha2.LabelFunctionName]
	if name == "" {
		return
	}
	fn := types.NamespacedName{Namespace: d.Namespace, Name: name}
	replicas := func(d *appsv1.Deployment) int32 {
		if d.Spec.Replicas == nil {
			return 1
		}
		return *d.Spec.Replicas
	}
	switch {
	case replicas(old) == 0 && replicas(d) > 0 && d.Status.ReadyReplicas == 0:
		go p.claim(ctx, fn)
	case d.Status.ReadyReplicas > 0 && old.Status.ReadyReplicas == 0, replicas(d) == 0 && replicas(old) > 0:
		go p.retire(ctx, fn)
	}
}

// token is the bearer token of a standby pod.
func (p *Pool) token(namespace, name string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(namespace + "/" + name))
	return hex.EncodeToString(m.Sum(nil))
}

// claim gives a standby pod of fn's pool to fn: the host loads fn, then
// the pod is labelled as fn's, which puts it in fn's Service.
func (p *Pool) claim(ctx context.Context, fn types.NamespacedName) {
	p.mu.Lock()
	m, ok := p.functions[fn]
	p.mu.Unlock()
	if !ok {
		return
	}
	start := time.Now()
	pod, err := p.take(ctx, poolKey{fn.Namespace, m.shape})
	if err != nil || pod == nil {
		if err != nil {
			p.log.Error(err, "take a standby pod", "function", fn)
		} else {
			p.log.Info("no standby pod ready: the Function wakes on the Deployment path", "function", fn)
		}
		return
	}
	podKey := client.ObjectKeyFromObject(pod)
	defer func() {
		p.mu.Lock()
		delete(p.taken, podKey)
		p.mu.Unlock()
		p.poke()
	}()
	// The host loads the Function while the pod is labelled as its: the
	// two go on at once, since a pod in the Function's Service takes no
	// traffic before its host says it serves that Function (the event
	// bridge's probe, the kubelet's readiness). No optimistic lock on the
	// patch: one claimer takes a pod (taken), and the kubelet's status
	// updates, which a lock would trip over, change no label.
	loaded := make(chan error, 1)
	go func() { loaded <- p.specialize(ctx, pod, m.plan) }()
	// The patch carries the pod's UID, which the API server does not let
	// change: it fails on another pod of the same name.
	base := pod.DeepCopy()
	base.UID = ""
	patch := client.MergeFrom(base)
	for k, v := range m.plan.Labels {
		pod.Labels[k] = v
	}
	pod.Labels[LabelClaimedBy] = fn.Name
	delete(pod.Labels, LabelShape)
	// Deleted with its Function, whatever becomes of the pool.
	pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{
		APIVersion: v1alpha2.GroupVersion.String(), Kind: "Function", Name: fn.Name, UID: m.plan.UID,
	})
	patchErr := p.c.Patch(ctx, pod, patch)
	loadErr := <-loaded
	if err := errors.Join(loadErr, patchErr); err != nil {
		p.log.Error(err, "give a standby pod its Function; deleting the pod", "function", fn, "pod", pod.Name)
		_ = p.c.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
		var refused *hostAnswer
		if errors.As(loadErr, &refused) {
			p.mu.Lock()
			p.failed[fn] = refused.Error()
			p.mu.Unlock()
		}
		return
	}
	p.mu.Lock()
	delete(p.failed, fn)
	p.mu.Unlock()
	p.log.Info("gave a standby pod to a Function woken from zero", "function", fn, "pod", pod.Name, "took", time.Since(start))
}

// take returns a started standby pod of pool k and marks it taken; nil
// when there is none.
func (p *Pool) take(ctx context.Context, k poolKey) (*corev1.Pod, error) {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.InNamespace(k.namespace), client.MatchingLabels{LabelShape: k.shape}); err != nil {
		return nil, fmt.Errorf("list standby pods: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range pods.Items {
		pod := &pods.Items[i]
		key := client.ObjectKeyFromObject(pod)
		if p.taken[key] || !started(pod) || !p.ours(pod) {
			continue
		}
		p.taken[key] = true
		return pod, nil
	}
	return nil, nil
}

// ours reports whether the pool made pod: it is the pod the pool made
// under its name (its UID), and its host's token hash is that of the
// token the pool derives for it. A pod someone else labelled as standby (a
// tenant of the namespace, say), or made under the name of one of the
// pool's after deleting it, with its environment copied, is never given
// a Function's source, nor counted in the pool. p.mu is held.
func (p *Pool) ours(pod *corev1.Pod) bool {
	if uid, ok := p.made[client.ObjectKeyFromObject(pod)]; !ok || uid != pod.UID {
		return false
	}
	want := runtimes.StandbyTokenHash(p.token(pod.Namespace, pod.Name))
	for _, c := range pod.Spec.Containers {
		if c.Name != resources.ContainerFunction {
			continue
		}
		for _, e := range c.Env {
			if e.Name == runtimes.EnvStandbyTokenSHA256 {
				return e.Value == want
			}
		}
	}
	return false
}

// started reports whether a pod's host serves: running, with an address,
// its container's startup probe passed, not being deleted.
func started(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.Name == resources.ContainerFunction {
			return c.Started != nil && *c.Started
		}
	}
	return false
}

// maxAnswerHeaderBytes bounds the headers of a host's answer to
// specialize: a few (runtimes.FunctionHeader) from a host that runs a
// tenant's code once loaded; one with more fails the claim, rather than be
// read up to Go's 10 MiB by the controller every tenant shares.
const maxAnswerHeaderBytes = 16 << 10

// hostTransport is the transport to standby hosts: no proxy from the
// environment, and answers with at most maxAnswerHeaderBytes of headers.
func hostTransport() *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxAnswerHeaderBytes,
	}
}

// specialize sends fn's source and environment to pod's host.
func (p *Pool) specialize(ctx context.Context, pod *corev1.Pod, fn plan.Plan) error {
	body, err := json.Marshal(Specialization(fn))
	if err != nil {
		return fmt.Errorf("encode the specialization: %w", err)
	}
	url := "http://" + p.address(pod) + runtimes.SpecializePath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("specialize %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token(pod.Namespace, pod.Name))
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("specialize %s: %w", url, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("specialize %s: %w", url, &hostAnswer{status: resp.StatusCode, text: string(answer)})
	}
	// A host that already serves a Function answers the path as that
	// Function's: only its own name says this one was loaded.
	if want := fn.Namespace + "/" + fn.Name; resp.Header.Get(runtimes.FunctionHeader) != want {
		return fmt.Errorf("specialize %s: the host serves %q, not %s", url, resp.Header.Get(runtimes.FunctionHeader), want)
	}
	return nil
}

// hostAnswer is a standby host's refusal of a Function: its status and
// the reason it gives.
type hostAnswer struct {
	status int
	text   string
}

func (a *hostAnswer) Error() string {
	return fmt.Sprintf("the standby host answered %d: %s", a.status, strings.TrimSpace(a.text))
}

// retire deletes the pods the pool gave fn.
func (p *Pool) retire(ctx context.Context, fn types.NamespacedName) {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.InNamespace(fn.Namespace), client.MatchingLabels{LabelClaimedBy: fn.Name}); err != nil {
		p.log.Error(err, "list claimed pods", "function", fn)
		return
	}
	for i := range pods.Items {
		if err := p.c.Delete(ctx, &pods.Items[i]); client.IgnoreNotFound(err) != nil {
			p.log.Error(err, "delete a claimed pod", "function", fn, "pod", pods.Items[i].Name)
			continue
		}
		p.log.Info("deleted the pod the pool gave a Function", "function", fn, "pod", pods.Items[i].Name)
	}
}

// refill makes Size standby pods per pool that a pooled Function needs,
// and deletes standby pods no pool needs (and claimed pods of Functions
// the pool no longer serves).
func (p *Pool) refill(ctx context.Context) error {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.HasLabels{LabelShape}); err != nil {
		return fmt.Errorf("list standby pods: %w", err)
	}
	p.mu.Lock()
	want := map[poolKey]plan.Plan{}
	for _, m := range p.functions {
		want[poolKey{m.plan.Namespace, m.shape}] = m.plan
	}
	p.mu.Unlock()
	size := map[string]int{}
	for k := range want {
		if _, ok := size[k.namespace]; !ok {
			size[k.namespace] = p.sizeOf(ctx, k.namespace)
		}
	}
	p.mu.Lock()
	have := map[poolKey]int{}
	var extra []*corev1.Pod
	listed := map[types.NamespacedName]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		key := client.ObjectKeyFromObject(pod)
		listed[key] = true
		delete(p.created, key)
		if pod.DeletionTimestamp != nil || !p.ours(pod) {
			continue
		}
		k := poolKey{pod.Namespace, pod.Labels[LabelShape]}
		if _, ok := want[k]; !ok || have[k] >= size[k.namespace] {
			if !p.taken[key] {
				extra = append(extra, pod)
			}
			continue
		}
		have[k]++
	}
	for _, k := range p.created {
		have[k]++
	}
	// The pods made that are gone, or given to a Function, are no longer
	// standby pods of the pool's.
	for key := range p.made {
		if _, pending := p.created[key]; !listed[key] && !pending {
			delete(p.made, key)
		}
	}
	var todo []poolKey
	for k := range want {
		for n := have[k]; n < size[k.namespace]; n++ {
			todo = append(todo, k)
		}
	}
	p.mu.Unlock()
	var errs []error
	for _, pod := range extra {
		if err := p.c.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete standby pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	for _, k := range todo {
		if err := p.create(ctx, k, want[k]); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, p.retireServed(ctx))
	return errors.Join(errs...)
}

// retireServed deletes the claimed pods whose Function's Deployment has a
// ready pod of its own or is at zero: those whose change the Deployment
// watch missed (a claim that ended after it, an earlier leader's).
func (p *Pool) retireServed(ctx context.Context) error {
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods, client.HasLabels{LabelClaimedBy}); err != nil {
		return fmt.Errorf("list claimed pods: %w", err)
	}
	done := map[types.NamespacedName]bool{}
	for _, pod := range pods.Items {
		fn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Labels[LabelClaimedBy]}
		if done[fn] {
			continue
		}
		done[fn] = true
		var d appsv1.Deployment
		err := p.c.Get(ctx, fn, &d)
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("get deployment %s: %w", fn, err)
		}
		if apierrors.IsNotFound(err) || d.Status.ReadyReplicas > 0 || (d.Spec.Replicas != nil && *d.Spec.Replicas == 0) {
			p.retire(ctx, fn)
		}
	}
	return nil
}

// sizeOf is the pool size of a namespace: 0 while it is being deleted,
// else its AnnotationSize, else Config.Size.
func (p *Pool) sizeOf(ctx context.Context, namespace string) int {
	var ns corev1.Namespace
	if err := p.c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return p.cfg.Size
	}
	if !ns.DeletionTimestamp.IsZero() {
		// Nothing can be made in a namespace being deleted.
		return 0
	}
	v, ok := ns.Annotations[AnnotationSize]
	if !ok {
		return p.cfg.Size
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > MaxSize {
		p.log.Info("ignoring a namespace's warm pool size: want an integer within 0..MaxSize", "namespace", namespace, "annotation", AnnotationSize, "value", v, "MaxSize", MaxSize)
		return p.cfg.Size
	}
	return n
}

// create makes a standby pod of pool k, shaped as fn.
func (p *Pool) create(ctx context.Context, k poolKey, fn plan.Plan) error {
	suffix := make([]byte, 5)
	if _, err := rand.Read(suffix); err != nil {
		return fmt.Errorf("name a standby pod: %w", err)
	}
	name := "kfn-pool-" + fn.Runtime.Name + "-" + hex.EncodeToString(suffix)
	env := append(podEnv(fn), corev1.EnvVar{Name: runtimes.EnvStandbyTokenSHA256, Value: runtimes.StandbyTokenHash(p.token(k.namespace, name))})
	labels := map[string]string{LabelShape: k.shape, v1alpha2.LabelManagedBy: v1alpha2.LabelManagedByValue}
	pod := resources.StandbyPod(withoutDependencies(fn), p.cfg.Resources, name, labels, env)
	if err := p.c.Apply(ctx, pod, client.FieldOwner("kfn-pool"), client.ForceOwnership); err != nil {
		return fmt.Errorf("create standby pod %s/%s: %w", k.namespace, name, err)
	}
	if pod.UID == nil || *pod.UID == "" {
		return fmt.Errorf("create standby pod %s/%s: the API server's answer has no UID", k.namespace, name)
	}
	key := types.NamespacedName{Namespace: k.namespace, Name: name}
	p.mu.Lock()
	p.created[key] = k
	p.made[key] = *pod.UID
	p.mu.Unlock()
	return nil
}
