package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kfn-dev/kfn/internal/logging"
	"github.com/kfn-dev/kfn/local/dev"
)

// devFlags are the flags of kfn dev.
type devFlags struct {
	addr      string
	natsPort  int
	cooldown  time.Duration
	stateDir  string
	noWatch   bool
	plainLogs bool
	logLevel  string
	logFormat string
	maxConns  int
}

func newDevCommand() *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev [DIR]",
		Short: "Run the whole platform on this machine for the functions and subscriptions in DIR",
		Long: `dev runs kfn without Kubernetes: an embedded NATS JetStream (its data in
DIR/.kfn, kept across restarts), the publisher, gateway and admin API on one
port, the dispatcher, the scaler and a local autoscaler that drives it as KEDA
would, and every Function in DIR as local node/python3 processes. A live web
view of the functions, Subscriptions, recent events and dead letters is at
http://ADDR/_kfn/ui/ (the address it prints when it is up).

DIR holds Kubernetes manifests (the YAML you would kubectl apply) and
Kyma-CLI-style function folders (config.yaml beside handler.js or handler.py).
Edits are applied as you save: a changed function is started, checked and
switched to without dropping requests; one that fails to start, or a file
that cannot be read or admitted, keeps the old version (and its
Subscriptions) running and shows why. Ctrl-C stops every process.`,
		Example: `  kfn dev examples/shop
  kfn dev --addr 127.0.0.1:9090 --cooldown 10s .`,
		Args: atMostOneArg("DIR"),
		RunE: f.run,
	}
	f.register(cmd)
	return cmd
}

func (f *devFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to serve the publisher, gateway and admin API on, host:port or http://host:port")
	fs.IntVar(&f.natsPort, "nats-port", 0, "client port of the embedded NATS server (0: a free one)")
	fs.DurationVar(&f.cooldown, "cooldown", 0, "replace every function's scaleConfig.cooldownPeriod, e.g. 10s to watch scale-to-zero quickly")
	fs.StringVar(&f.stateDir, "state-dir", "", "where NATS data, function files and installed dependencies live (default DIR/.kfn)")
	fs.IntVar(&f.maxConns, "max-connections", 0, "most connections open at once on --addr; past it, idle keep-alive connections are closed for new ones and the rest wait (0: a quarter of the process's file limit, at most 4096)")
	fs.BoolVar(&f.noWatch, "no-watch", false, "do not apply edits to DIR while running")
	fs.BoolVar(&f.plainLogs, "plain", false, "plain logs only, no status table, even on a terminal")
	fs.StringVar(&f.logLevel, "log-level", "info", "level of kfn's own logs: "+logging.Levels)
	fs.StringVar(&f.logFormat, "log-format", "text", "kfn's own logs as text (key=value, beside the functions' output) or json (the lines kfn's servers write in a cluster); the keys are the same")
}

// run runs the platform for the functions in DIR (args[0], default the
// current folder) until the command's context ends.
func (f *devFlags) run(cmd *cobra.Command, args []string) error {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return usagef("%s is not a directory: give the folder with your functions, e.g. 'kfn dev examples/shop'", dir)
	}
	listen, err := baseURL(f.addr)
	if err != nil {
		return err
	}
	if strings.HasPrefix(listen, "https://") {
		return usagef("--addr %q: kfn dev serves plain HTTP; give host:port or http://host:port", f.addr)
	}
	out := cmd.OutOrStdout()
	log, err := devLogger(out, f.logLevel, f.logFormat)
	if err != nil {
		return usagef("%v", err)
	}
	tty := isTerminal(out) && !f.plainLogs
	cfg := dev.Config{Dir: dir, Addr: strings.TrimPrefix(listen, "http://"), NATSPort: f.natsPort, Cooldown: f.cooldown, StateDir: f.stateDir, Output: out, Logger: log, MaxConnections: f.maxConns}
	if f.noWatch {
		cfg.WatchInterval = -1
	}
	started := time.Now()
	return dev.Run(cmd.Context(), cfg, func(p *dev.Platform) {
		fmt.Fprintf(out, "kfn dev: %s is up on http://%s in %s (NATS %s)\n", dir, p.Addr(), time.Since(started).Round(time.Millisecond), p.NATSURL())
		fmt.Fprintf(out, "Web view: http://%s%s (functions, Subscriptions, events and dead letters, live)\n", p.Addr(), dev.ViewPath)
		printTry(out, p.Status(), p.Addr())
		if tty {
			go liveTable(cmd.Context(), out, p)
		}
	})
}

// devLogger is the logger of kfn dev's components, in the layout of kfn's
// servers (package logging), on out beside the functions' output: by
// default as text, the same keys as key=value, which reads better between
// the functions' lines in a terminal; as JSON for a machine. Each
// component adds its name.
func devLogger(out io.Writer, level, format string) (*slog.Logger, error) {
	f, err := logging.ParseFormat(format)
	if err != nil {
		return nil, fmt.Errorf("--log-format: %w", err)
	}
	log, err := logging.New(out, level, f)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return log, nil
}

// printTry prints commands that exercise what the project defines.
func printTry(out io.Writer, st dev.Status, addr string) {
	kfn := "kfn"
	if strings.Contains(os.Args[0], string(filepath.Separator)) && !strings.Contains(os.Args[0], "go-build") {
		kfn = os.Args[0]
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, kfn); err == nil && !strings.HasPrefix(rel, "..") {
				kfn = rel
			}
		}
	}
	flag := ""
	if addr != strings.TrimPrefix(DefaultAddr, "http://") {
		flag = " --addr " + addr
	}
	sinks := map[string]bool{}
	for _, s := range st.Subscriptions {
		sinks[s.Sink] = true
	}
	var lines []string
	for _, f := range st.Functions {
		// An HTTP function: always running, and no subscription delivers to it.
		if !f.Autoscaled && !sinks["http://"+f.Name+"."+f.Namespace+".svc.cluster.local"] {
			lines = append(lines, fmt.Sprintf("curl -X POST http://%s/%s/%s -H 'Content-Type: application/json' -d '{\"id\": \"1\", \"item\": \"book\"}'", addr, f.Namespace, f.Name))
			break
		}
	}
	if len(st.Subscriptions) > 0 && len(st.Subscriptions[0].Types) > 0 {
		s := st.Subscriptions[0]
		lines = append(lines, fmt.Sprintf("%s publish%s --type %s --source %s --data '{\"id\": \"2\", \"item\": \"pen\"}'", kfn, flag, s.Types[0], sourceOf(s)))
	}
	lines = append(lines, fmt.Sprintf("%s get%s", kfn, flag))
	if len(st.Functions) > 0 {
		f := st.Functions[0]
		lines = append(lines, fmt.Sprintf("%s logs%s -n %s %s -f", kfn, flag, f.Namespace, f.Name))
	}
	fmt.Fprintln(out, "Try:")
	for _, l := range lines {
		fmt.Fprintln(out, "  "+l)
	}
	for _, e := range st.Errors {
		fmt.Fprintf(out, "Problem: %s\n", e)
	}
}

func sourceOf(s dev.SubscriptionStatus) string {
	if s.Source != "" {
		return s.Source
	}
	return "kfn"
}

// liveTable prints the status table whenever what it shows changes (at
// most every two seconds), between the logs.
func liveTable(ctx context.Context, out io.Writer, p *dev.Platform) {
	var last dev.Status
	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	for {
		st := p.Status()
		view := st
		for i := range view.Functions {
			view.Functions[i].Backlog, view.Functions[i].InFlight, view.Functions[i].Active = 0, 0, false
		}
		for i := range view.Subscriptions {
			view.Subscriptions[i].Delivered, view.Subscriptions[i].Failed = 0, 0
		}
		if !reflect.DeepEqual(view, last) {
			last = view
			fmt.Fprintln(out, bold("── kfn dev ─────────────────────────────────────────────"))
			writeStatus(out, st)
			fmt.Fprintln(out, bold("────────────────────────────────────────────────────────"))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// bold marks text bold for a terminal, unless NO_COLOR is set
// (https://no-color.org: any non-empty value).
func bold(text string) string {
	if os.Getenv("NO_COLOR") != "" {
		return text
	}
	return "\x1b[1m" + text + "\x1b[0m"
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
