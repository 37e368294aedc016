package testcluster

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kfn-dev/kfn/internal/tail"
)

func TestOutputQuotesWhatEachProcessSaidLast(t *testing.T) {
	tests := map[string]struct {
		etcd, apiServer string
		want            string
	}{
		"silent":    {want: ""},
		"only etcd": {etcd: "  bind: address in use \n", want: "\n--- last output of etcd ---\nbind: address in use"},
		"both": {etcd: "e\n", apiServer: "a\n",
			want: "\n--- last output of etcd ---\ne\n--- last output of kube-apiserver ---\na"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := &output{etcd: tail.New(outputTail), apiServer: tail.New(outputTail)}
			_, _ = o.etcd.Write([]byte(tc.etcd))
			_, _ = o.apiServer.Write([]byte(tc.apiServer))
			require.Equal(t, tc.want, o.String())
		})
	}
}
