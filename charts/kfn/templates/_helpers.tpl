{{/*
Names. Every object is named <fullname>-<component>; fullname is the release
name, or <release>-kfn when the release name does not contain "kfn".
*/}}
{{- define "kfn.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kfn.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kfn.controller.name" -}}{{ include "kfn.fullname" . }}-controller{{- end }}
{{- define "kfn.claims.name" -}}{{ include "kfn.fullname" . }}-controller-claims{{- end }}
{{/* Whether a Function's first event or request claims a standby pod at once (functions.warmPool.claimAtFirstEvent). */}}
{{- define "kfn.claims.enabled" -}}{{ if and .Values.functions.warmPool.enabled .Values.functions.warmPool.claimAtFirstEvent }}true{{ end }}{{- end }}
{{- define "kfn.eventbridge.name" -}}{{ include "kfn.fullname" . }}-eventbridge{{- end }}
{{- define "kfn.publisher.name" -}}{{ include "kfn.fullname" . }}-publisher{{- end }}
{{- define "kfn.gateway.name" -}}{{ include "kfn.fullname" . }}-gateway{{- end }}
{{- define "kfn.scaler.name" -}}{{ include "kfn.fullname" . }}-scaler{{- end }}
{{- define "kfn.nats.name" -}}{{ include "kfn.fullname" . }}-nats{{- end }}

{{/* Labels of every object; call with (dict "ctx" $ "component" "controller"). */}}
{{- define "kfn.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kfn.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: kfn
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "kfn.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kfn.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The server image, pinned by digest when one is given. */}}
{{- define "kfn.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{ .Values.image.registry }}/{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.registry }}/{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{/* The runtime images, as a YAML map runtime: image. */}}
{{- define "kfn.runtimeImages" -}}
{{- $registry := default .Values.image.registry .Values.runtimes.registry -}}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.runtimes.tag -}}
{{- range $rt, $img := .Values.runtimes.images }}
{{- $base := ternary "nodejs22" $rt (eq $rt "nodejs20") }}
{{ $rt }}: {{ default (printf "%s/runtime-%s:%s" $registry $base $tag) $img | quote }}
{{- end }}
{{- end }}

{{/* The registries a runtimeImageOverride may name, as a YAML list:
functions.allowedImageRegistries, else each runtime image's repository
without its last segment (tag and digest go with it). */}}
{{- define "kfn.allowedImageRegistries" -}}
{{- $registries := .Values.functions.allowedImageRegistries -}}
{{- if not $registries -}}
{{- $registries = list -}}
{{- range $rt, $img := (include "kfn.runtimeImages" . | fromYaml) -}}
{{- $parts := splitList "/" (first (splitList "@" $img)) -}}
{{- if gt (len $parts) 1 -}}
{{- $registries = append $registries (join "/" (initial $parts)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (uniq $registries) -}}
{{- end }}

{{/* Addresses inside the cluster. */}}
{{- define "kfn.publisherAddress" -}}
{{- $port := ternary "" (printf ":%d" (int .Values.eventbridge.service.port)) (eq (int .Values.eventbridge.service.port) 80) -}}
{{- coalesce .Values.serverless.eventing.endpoint .Values.functions.publisherAddress (printf "http://%s.%s.svc.cluster.local%s/publish" (include "kfn.publisher.name" .) .Release.Namespace $port) -}}
{{- end }}

{{/* The dependency cache of Function pods (KFN_DEPENDENCY_CACHE): functions.dependencyCache.address, else this release's publisher when its cache serves (eventbridge.dependencyCache.enabled, publisher senders kubernetes); empty when off. */}}
{{- define "kfn.dependencyCacheAddress" -}}
{{- $f := .Values.functions.dependencyCache -}}
{{- $e := .Values.eventbridge -}}
{{- if $f.enabled -}}
{{- if $f.address -}}
{{- $f.address -}}
{{- else if and $e.dependencyCache.enabled (eq $e.publisher.senders "kubernetes") -}}
{{- $port := ternary "" (printf ":%d" (int $e.service.port)) (eq (int $e.service.port) 80) -}}
{{- printf "http://%s.%s.svc.cluster.local%s/_kfn/dependencies" (include "kfn.publisher.name" .) .Release.Namespace $port -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The functions' trace collector: Kyma's Serverless CR setting, else functions.traceCollectorEndpoint. */}}
{{- define "kfn.functionsTraceEndpoint" -}}
{{- .Values.serverless.tracing.endpoint | default .Values.functions.traceCollectorEndpoint -}}
{{- end }}

{{/* The controller's log level: Kyma's Serverless CR setting (its zap levels fatal, panic and dpanic are error here), else controller.logLevel. */}}
{{- define "kfn.controllerLogLevel" -}}
{{- $l := .Values.serverless.logLevel -}}
{{- if has $l (list "fatal" "panic" "dpanic") -}}error{{- else -}}{{ $l | default .Values.controller.logLevel }}{{- end -}}
{{- end }}

{{/* Text logs for the controller: Kyma's logFormat console, else controller.logDevelopment. */}}
{{- define "kfn.controllerLogDevelopment" -}}
{{- $f := .Values.serverless.logFormat -}}
{{- if $f -}}{{ eq $f "console" }}{{- else -}}{{ .Values.controller.logDevelopment }}{{- end -}}
{{- end }}

{{- define "kfn.scalerAddress" -}}
{{ include "kfn.scaler.name" . }}.{{ .Release.Namespace }}.svc.cluster.local:{{ .Values.scaler.port }}
{{- end }}

{{- define "kfn.scaler.tlsSecret" -}}
{{- default (printf "%s-tls" (include "kfn.scaler.name" .)) .Values.scaler.tls.existingSecret -}}
{{- end }}

{{- define "kfn.scaler.kedaSecret" -}}{{ include "kfn.scaler.name" . }}-keda-client{{- end }}

{{/*
"true" when the chart makes KEDA's ClusterTriggerAuthentication and its
Secret: with generated certificates and kind ClusterTriggerAuthentication,
when create is true, or auto and KEDA's API is installed.
*/}}
{{- define "kfn.scaler.createKedaAuthentication" -}}
{{- $a := .Values.scaler.tls.kedaAuthentication -}}
{{- $create := toString $a.create -}}
{{- $kedaAPI := .Capabilities.APIVersions.Has "keda.sh/v1alpha1/ClusterTriggerAuthentication" -}}
{{- and (not .Values.scaler.tls.existingSecret) (eq $a.kind "ClusterTriggerAuthentication") (or (eq $create "true") (and (eq $create "auto") $kedaAPI)) -}}
{{- end }}

{{/*
The scaler's generated certificates as YAML (base64 values: ca, crt, key,
clientCrt, clientKey): the ones in the cluster when both Secrets are there,
otherwise new ones (a CA and two certificates valid for 10 years).
*/}}
{{- define "kfn.scalerTLS" -}}
{{- $server := lookup "v1" "Secret" .Release.Namespace (include "kfn.scaler.tlsSecret" .) -}}
{{- $client := dict -}}
{{- if eq (include "kfn.scaler.createKedaAuthentication" .) "true" -}}
{{- $client = lookup "v1" "Secret" .Values.scaler.tls.kedaAuthentication.kedaNamespace (include "kfn.scaler.kedaSecret" .) -}}
{{- else -}}
{{- $client = dict "data" (dict "tls.crt" "" "tls.key" "") -}}
{{- end -}}
{{- $sd := (get $server "data") | default dict -}}
{{- $cd := (get $client "data") | default dict -}}
{{- if and (get $sd "ca.crt") (get $sd "tls.crt") (get $sd "tls.key") (hasKey $cd "tls.crt") (hasKey $cd "tls.key") (eq (get $cd "ca.crt" | default (get $sd "ca.crt")) (get $sd "ca.crt")) -}}
ca: {{ get $sd "ca.crt" }}
crt: {{ get $sd "tls.crt" }}
key: {{ get $sd "tls.key" }}
clientCrt: {{ get $cd "tls.crt" | quote }}
clientKey: {{ get $cd "tls.key" | quote }}
{{- else -}}
{{- $svc := include "kfn.scaler.name" . -}}
{{- $ns := .Release.Namespace -}}
{{- $ca := genCA (printf "%s-ca" $svc) 3650 -}}
{{- $names := list (printf "%s.%s.svc.cluster.local" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s" $svc $ns) $svc -}}
{{- $crt := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $names 3650 $ca -}}
{{- $cl := genSignedCert "keda-operator" nil nil 3650 $ca -}}
ca: {{ $ca.Cert | b64enc }}
crt: {{ $crt.Cert | b64enc }}
key: {{ $crt.Key | b64enc }}
clientCrt: {{ $cl.Cert | b64enc }}
clientKey: {{ $cl.Key | b64enc }}
{{- end -}}
{{- end }}

{{- define "kfn.natsURL" -}}
{{- if .Values.nats.enabled -}}
nats://{{ include "kfn.nats.name" . }}.{{ .Release.Namespace }}.svc.cluster.local:4222
{{- else if .Values.externalNATS.existingSecret -}}
$(NATS_URL)
{{- else -}}
{{ .Values.externalNATS.url }}
{{- end -}}
{{- end }}

{{/* The env that carries the NATS URL from a Secret, when there is one. */}}
{{- define "kfn.natsEnv" -}}
{{- if and (not .Values.nats.enabled) .Values.externalNATS.existingSecret }}
- name: NATS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalNATS.existingSecret }}
      key: {{ .Values.externalNATS.urlKey }}
{{- end }}
{{- end }}

{{/*
Security contexts that meet the restricted Pod Security Standard; the
values' podSecurityContext / containerSecurityContext are merged over them.
Call with (dict "ctx" $ "uid" 65532).
*/}}
{{- define "kfn.podSecurityContext" -}}
{{- $base := dict "runAsNonRoot" true "runAsUser" .uid "runAsGroup" .uid "fsGroup" .uid "fsGroupChangePolicy" "OnRootMismatch" "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $base (deepCopy .ctx.Values.podSecurityContext)) }}
{{- end }}

{{- define "kfn.containerSecurityContext" -}}
{{- $base := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "runAsNonRoot" true "capabilities" (dict "drop" (list "ALL")) "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $base (deepCopy .ctx.Values.containerSecurityContext)) }}
{{- end }}

{{/*
Scheduling of a component: call with (dict "ctx" $ "v" .Values.controller "component" "controller").
With more than one replica and no affinity of the user's, replicas prefer
different nodes.
*/}}
{{- define "kfn.scheduling" -}}
{{- with .v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if .v.affinity }}
affinity:
  {{- toYaml .v.affinity | nindent 2 }}
{{- else if gt (int (include "kfn.replicas" (dict "ctx" .ctx "component" .component))) 1 }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "kfn.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 14 }}
{{- end }}
{{- with .v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The replicas of a component: its own replicas value when set, else what
the profile gives it. Call with (dict "ctx" $ "component" "controller");
component "streams" gives the JetStream replicas of kfn's streams and lock
bucket. Profile ha (the default): 2 controllers, 2 event bridges, 2
scalers, 3 NATS servers, and streams on as many servers as the chart's NATS
has, at most 3 (1 with an external NATS, whose servers the chart does not
know). Profile small: one of each, streams R1.
*/}}
{{- define "kfn.replicas" -}}
{{- $v := .ctx.Values -}}
{{- $small := eq (toString $v.profile) "small" -}}
{{- $set := ternary $v.eventbridge.streams.replicas (index $v .component | default dict).replicas (eq .component "streams") -}}
{{- if not (kindIs "invalid" $set) -}}
{{- int $set -}}
{{- else if $small -}}
1
{{- else if eq .component "streams" -}}
{{- if $v.nats.enabled -}}{{ min 3 (int (include "kfn.replicas" (dict "ctx" .ctx "component" "nats"))) }}{{- else -}}1{{- end -}}
{{- else if eq .component "nats" -}}
3
{{- else -}}
2
{{- end -}}
{{- end }}

{{/*
The count of the event stream's partitions, eventbridge.streams.partitions.
*/}}
{{- define "kfn.partitions" -}}
{{- int .Values.eventbridge.streams.partitions -}}
{{- end }}

{{- define "kfn.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* JetStream's file store limit: 80% of each server's volume, the rest left to
what NATS writes beside the messages (indexes, consumers' state, the Raft
logs of replicated streams), so that the volume never fills under it. */}}
{{- define "kfn.natsFileStore" -}}
{{- div (mul (int64 (include "kfn.bytes" .Values.nats.jetstream.fileStorage.size)) 8) 10 -}}
{{- end }}

{{/*
Checks of values that span several keys (the schema checks each key alone).
*/}}
{{- define "kfn.validate" -}}
{{- if and (not .Values.nats.enabled) (not .Values.externalNATS.url) (not .Values.externalNATS.existingSecret) }}
{{- fail "nats.enabled is false: set externalNATS.url or externalNATS.existingSecret to the NATS server the event bridge should use" }}
{{- end }}
{{- $streams := int (include "kfn.replicas" (dict "ctx" . "component" "streams")) }}
{{- $servers := int (include "kfn.replicas" (dict "ctx" . "component" "nats")) }}
{{- if and .Values.nats.enabled (gt $streams $servers) }}
{{- fail (printf "eventbridge.streams.replicas (%d) cannot exceed nats.replicas (%d): JetStream keeps each replica on a different server" $streams $servers) }}
{{- end }}
{{- if and .Values.nats.enabled (lt (int64 .Values.nats.maxPayload) (int64 .Values.eventbridge.streams.maxMsgSize)) }}
{{- fail (printf "nats.maxPayload (%d) must be at least eventbridge.streams.maxMsgSize (%d), or NATS refuses events the stream accepts" (int64 .Values.nats.maxPayload) (int64 .Values.eventbridge.streams.maxMsgSize)) }}
{{- end }}
{{- $st := .Values.eventbridge.streams }}
{{- if and .Values.nats.enabled (eq $st.storage "file") }}
{{- $partitions := int64 (include "kfn.partitions" .) }}
{{- $reserved := add (mul $partitions (max 0 (int64 $st.maxBytes))) (max 0 (int64 $st.deadLetterMaxBytes)) }}
{{- if .Values.eventbridge.dependencyCache.enabled }}
{{- $reserved = add $reserved (max 0 (int64 .Values.eventbridge.dependencyCache.maxBytes)) }}
{{- end }}
{{- $store := int64 (include "kfn.natsFileStore" .) }}
{{- if gt (int64 $reserved) $store }}
{{- fail (printf "JetStream's file store, 80%% of nats.jetstream.fileStorage.size (%d bytes), is less than what NATS reserves on each server for eventbridge.streams.maxBytes (once per partition) + deadLetterMaxBytes + eventbridge.dependencyCache.maxBytes (%d bytes): NATS would refuse to make the streams; raise the size or lower those" $store (int64 $reserved)) }}
{{- end }}
{{- end }}
{{- if and .Values.scaler.tls.existingSecret (not .Values.scaler.tls.enabled) }}
{{- fail "scaler.tls.existingSecret is set but scaler.tls.enabled is false: enable TLS or drop the Secret" }}
{{- end }}
{{- if and .Values.scaler.tls.requireClientCert (not .Values.scaler.tls.enabled) }}
{{- fail "scaler.tls.requireClientCert needs scaler.tls.enabled" }}
{{- end }}
{{- end }}

{{/*
A Kubernetes quantity (256Mi, 1Gi, 500M) or a number of bytes as a plain
number of bytes, for the NATS config.
*/}}
{{- define "kfn.bytes" -}}
{{- $s := ternary (toString .) (toString (int64 .)) (kindIs "string" .) -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $out := "" -}}
{{- range $suffix, $mul := $units -}}
{{- if and (not $out) (hasSuffix $suffix $s) (regexMatch "^[0-9]+$" (trimSuffix $suffix $s)) -}}
{{- $out = mul (int64 (trimSuffix $suffix $s)) $mul | toString -}}
{{- end -}}
{{- end -}}
{{- if not $out -}}
{{- if not (regexMatch "^[0-9]+$" $s) -}}
{{- fail (printf "%q is not a number of bytes nor a quantity like 256Mi" $s) -}}
{{- end -}}
{{- $out = $s -}}
{{- end -}}
{{- $out -}}
{{- end }}

{{- define "kfn.natsConfigChecksum" -}}
{{- $s := .Values.eventbridge.streams -}}
{{- toJson (list .Values.nats.maxPayload .Values.nats.jetstream (include "kfn.replicas" (dict "ctx" . "component" "nats")) .Values.nats.auth.enabled .Values.nats.tls.enabled $s.eventStream $s.deadLetterStream) | sha256sum -}}
{{- end }}

{{/*
kfn.natsAuthData is the data (base64) of the NATS passwords' Secret: the
Secret already in the cluster (Helm's lookup; so upgrades keep it), else
new random passwords. Computed once per rendering (kept in the values), so
that the Secret and the checksum that restarts NATS agree. Without a
cluster (helm template) lookup finds nothing: every rendering makes new
passwords.
*/}}
{{- define "kfn.natsAuthData" -}}
{{- $c := .Values.nats.auth -}}
{{- if not (hasKey $c "_data") -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "kfn.natsAuth.secretName" .) -}}
{{- $data := dict -}}
{{- range $k := list "eventbridge" "scaler" "routes" -}}
{{- $p := "" -}}
{{- if and $old $old.data -}}{{- $p = get $old.data $k -}}{{- end -}}
{{- $_ := set $data $k (default (randAlphaNum 32 | b64enc) $p) -}}
{{- end -}}
{{- $_ := set $c "_data" $data -}}
{{- end -}}
{{- toJson $c._data -}}
{{- end }}

{{- define "kfn.natsAuthChecksum" -}}
{{- if .Values.nats.auth.existingSecret -}}
{{- (lookup "v1" "Secret" .Release.Namespace .Values.nats.auth.existingSecret).data | toJson | sha256sum -}}
{{- else -}}
{{- include "kfn.natsAuthData" . | sha256sum -}}
{{- end -}}
{{- end }}

{{/*
kfn.natsTLSData is the data (base64) of the NATS certificate's Secret, like
kfn.natsAuthData: the one in the cluster, else a new CA (ten years) and a
server certificate it signs for the client Service and every server's
route name.
*/}}
{{- define "kfn.natsTLSData" -}}
{{- $c := .Values.nats.tls -}}
{{- if not (hasKey $c "_data") -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "kfn.natsTLS.secretName" .) -}}
{{- if and $old $old.data -}}
{{- $_ := set $c "_data" (pick $old.data "ca.crt" "tls.crt" "tls.key") -}}
{{- else -}}
{{- $name := include "kfn.nats.name" . -}}
{{- $ns := .Release.Namespace -}}
{{- $sans := list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns) (printf "*.%s-headless.%s.svc.cluster.local" $name $ns) (printf "*.%s-headless.%s.svc" $name $ns) -}}
{{- $ca := genCA (printf "%s-ca" $name) 3650 -}}
{{- $cert := genSignedCert $name nil $sans 3650 $ca -}}
{{- $_ := set $c "_data" (dict "ca.crt" ($ca.Cert | b64enc) "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc)) -}}
{{- end -}}
{{- end -}}
{{- toJson $c._data -}}
{{- end }}

{{- define "kfn.natsTLSChecksum" -}}
{{- if .Values.nats.tls.existingSecret -}}
{{- (lookup "v1" "Secret" .Release.Namespace .Values.nats.tls.existingSecret).data | toJson | sha256sum -}}
{{- else -}}
{{- include "kfn.natsTLSData" . | sha256sum -}}
{{- end -}}
{{- end }}

{{/*
kfn.kymaAlias decides whether the chart makes Kyma's publisher address,
eventing-publisher-proxy.<kymaPublisherAlias.namespace>: it prints "service"
(a Service selecting the event bridge: the release is in that namespace),
"externalName" (an ExternalName Service there, pointing at this release's
publisher), or a sentence saying why not. With enabled "auto" it is made
when the namespace is the release's, or exists (Helm's lookup, at install
and upgrade; `helm template` sees no cluster), and holds no Service of that
name of someone else's (Kyma's own publisher); an ExternalName alias answers
on port 80 only, so it also needs eventbridge.service.port 80. With true it
is made (the namespace must exist); with false never.
*/}}
{{- define "kfn.kymaAlias" -}}
{{- $a := .Values.kymaPublisherAlias -}}
{{- $mode := toString $a.enabled -}}
{{- $here := eq $a.namespace .Release.Namespace -}}
{{- $port80 := eq (int .Values.eventbridge.service.port) 80 -}}
{{- if eq $mode "false" -}}
disabled (kymaPublisherAlias.enabled=false)
{{- else if eq $mode "true" -}}
{{- if and (not $here) (not $port80) -}}
{{- fail (printf "kymaPublisherAlias: an alias in namespace %s is an ExternalName Service, which answers on port 80 only: set eventbridge.service.port to 80, or kymaPublisherAlias.enabled to false or auto" $a.namespace) -}}
{{- end -}}
{{- ternary "service" "externalName" $here -}}
{{- else -}}
{{- $existing := lookup "v1" "Service" $a.namespace "eventing-publisher-proxy" -}}
{{- $theirs := and $existing (ne (index ($existing.metadata.annotations | default dict) "meta.helm.sh/release-name" | default "") .Release.Name) -}}
{{- if $theirs -}}
not made: namespace {{ $a.namespace }} has a Service eventing-publisher-proxy of its own (Kyma's publisher?)
{{- else if $here -}}
service
{{- else if not (lookup "v1" "Namespace" "" $a.namespace) -}}
not made: namespace {{ $a.namespace }} does not exist (create it and upgrade, or set kymaPublisherAlias.enabled=true once it does)
{{- else if not $port80 -}}
not made: an ExternalName alias answers on port 80 only and eventbridge.service.port is {{ .Values.eventbridge.service.port }}
{{- else -}}
externalName
{{- end -}}
{{- end -}}
{{- end }}

{{/* The Secret of the in-chart NATS's passwords (keys eventbridge, scaler, routes). */}}
{{- define "kfn.natsAuth.secretName" -}}
{{- default (printf "%s-auth" (include "kfn.nats.name" .)) .Values.nats.auth.existingSecret -}}
{{- end }}

{{/* The Secret of the in-chart NATS's certificate (tls.crt, tls.key, ca.crt). */}}
{{- define "kfn.natsTLS.secretName" -}}
{{- default (printf "%s-tls" (include "kfn.nats.name" .)) .Values.nats.tls.existingSecret -}}
{{- end }}

{{/*
What a component (dict "ctx" $ "component" "eventbridge"|"scaler") needs
to connect to NATS with credentials: kfn.natsClientArgs are its flags,
kfn.natsClientMounts and kfn.natsClientVolumes the files (a projected
volume at /etc/kfn/nats holding only this component's password, and the
CA). With the in-chart NATS, the component's own user of the chart's
Secret; with an external NATS, externalNATS's user and keys.
*/}}
{{- define "kfn.natsClientFiles" -}}
{{- $v := .ctx.Values -}}
{{- $files := list -}}
{{- if $v.nats.enabled -}}
{{- if $v.nats.auth.enabled -}}{{- $files = append $files (list (include "kfn.natsAuth.secretName" .ctx) .component "password") -}}{{- end -}}
{{- if $v.nats.tls.enabled -}}{{- $files = append $files (list (include "kfn.natsTLS.secretName" .ctx) "ca.crt" "ca.crt") -}}{{- end -}}
{{- else if $v.externalNATS.existingSecret -}}
{{- $e := $v.externalNATS -}}
{{- if $e.passwordKey -}}{{- $files = append $files (list $e.existingSecret $e.passwordKey "password") -}}{{- end -}}
{{- if $e.credsKey -}}{{- $files = append $files (list $e.existingSecret $e.credsKey "nats.creds") -}}{{- end -}}
{{- if $e.caKey -}}{{- $files = append $files (list $e.existingSecret $e.caKey "ca.crt") -}}{{- end -}}
{{- end -}}
{{- toJson $files -}}
{{- end }}

{{- define "kfn.natsClientArgs" -}}
{{- $v := .ctx.Values -}}
{{- range $f := fromJsonArray (include "kfn.natsClientFiles" .) }}
{{- if eq (index $f 2) "password" }}
- -nats-user={{ if $v.nats.enabled }}kfn-{{ $.component }}{{ else }}{{ $v.externalNATS.user }}{{ end }}
- -nats-password-file=/etc/kfn/nats/password
{{- else if eq (index $f 2) "nats.creds" }}
- -nats-creds-file=/etc/kfn/nats/nats.creds
{{- else }}
- -nats-ca-file=/etc/kfn/nats/ca.crt
{{- end }}
{{- end }}
{{- end }}

{{- define "kfn.natsClientMounts" -}}
{{- if fromJsonArray (include "kfn.natsClientFiles" .) }}
- name: nats-client
  mountPath: /etc/kfn/nats
  readOnly: true
{{- end }}
{{- end }}

{{- define "kfn.natsClientVolumes" -}}
{{- $files := fromJsonArray (include "kfn.natsClientFiles" .) -}}
{{- if $files }}
- name: nats-client
  projected:
    sources:
      {{- range $f := $files }}
      - secret:
          name: {{ index $f 0 }}
          items:
            - key: {{ index $f 1 }}
              path: {{ index $f 2 }}
      {{- end }}
{{- end }}
{{- end }}
