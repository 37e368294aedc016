package cli

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kfn-dev/kfn/eventbridge/deadletter"
)

func newDLQCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List and replay dead-lettered events, of kfn dev or of a cluster",
		Long: `Events that used up their delivery attempts (spec.config maxDeliver) are kept
in the dead-letter stream with the reason. 'kfn dlq list' shows them; 'kfn dlq
replay SEQ' delivers one again to its original subscription only, and 'kfn dlq
replay --all --subscription NAME' does so for all of one subscription. In a
cluster they reach the admin API of kfn's event bridge through a port-forward,
as you: with your kubeconfig's credentials, the event bridge lets you list the
dead letters of the namespaces where you may view Subscriptions (the view role),
and replay or delete them where you may edit them (edit, admin); a refusal
names the permission missing.`,
	}
	cmd.AddCommand(newDLQListCommand(), newDLQReplayCommand())
	return cmd
}

func newDLQListCommand() *cobra.Command {
	var (
		target                          targetFlags
		subscription, namespace, output string
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead-lettered events",
		Args:  exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			q := url.Values{}
			if subscription != "" {
				q.Set("subscription", subscription)
				q.Set("namespace", target.namespace(cmd, namespace))
			} else if cmd.Flags().Changed("namespace") {
				q.Set("namespace", namespace)
			}
			ep, err := target.endpoints(cmd)
			if err != nil {
				return err
			}
			defer ep.close()
			var letters []deadletter.Letter
			if err := adminGet(cmd, ep, "/deadletters?"+q.Encode(), &letters); err != nil {
				return err
			}
			if output != outputTable {
				return printObject(cmd.OutOrStdout(), output, letters)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SEQ\tSUBSCRIPTION\tEVENT\tTYPE\tATTEMPTS\tLAST STATUS\tREASON")
			for _, l := range letters {
				fmt.Fprintf(tw, "%d\t%s/%s\t%s\t%s\t%d\t%d\t%s\n", l.Sequence, l.Namespace, l.Subscription, l.ID, l.Type, l.Attempts, l.Status, l.Error)
			}
			return tw.Flush()
		},
	}
	target.add(cmd)
	cmd.Flags().StringVar(&subscription, "subscription", "", "only this subscription's events")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "only this namespace's events; the namespace of --subscription (in a cluster: the context's by default)")
	outputFlag(cmd, &output)
	return cmd
}

func newDLQReplayCommand() *cobra.Command {
	var (
		target                  targetFlags
		subscription, namespace string
		all                     bool
	)
	cmd := &cobra.Command{
		Use:   "replay SEQ | --all --subscription NAME",
		Short: "Deliver dead-lettered events again to their subscription",
		Args: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) || len(args) > 1 {
				return usagef("%s needs either one SEQ (from 'kfn dlq list') or --all --subscription NAME", cmd.CommandPath())
			}
			if all && subscription == "" {
				return usagef("--all needs --subscription NAME: replays are per subscription")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			namespace = target.namespace(cmd, namespace)
			path := "/deadletters/replay?" + url.Values{"namespace": {namespace}, "subscription": {subscription}}.Encode()
			if !all {
				seq, err := strconv.ParseUint(args[0], 10, 64)
				if err != nil {
					return usagef("SEQ %q is not a number: take it from 'kfn dlq list'", args[0])
				}
				path = fmt.Sprintf("/deadletters/%d/replay", seq)
			}
			ep, err := target.endpoints(cmd)
			if err != nil {
				return err
			}
			defer ep.close()
			resp, err := adminDo(cmd, ep, http.MethodPost, path)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if all {
				fmt.Fprintf(cmd.OutOrStdout(), "replayed the dead-lettered events of %s/%s\n", namespace, subscription)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "replayed %s\n", args[0])
			}
			return nil
		},
	}
	target.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead-lettered event of --subscription")
	cmd.Flags().StringVar(&subscription, "subscription", "", "subscription whose events --all replays")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of --subscription (in a cluster: the context's by default)")
	return cmd
}
