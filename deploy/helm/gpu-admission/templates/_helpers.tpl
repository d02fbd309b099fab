{{/*
The chart's name, the value of every object's app.kubernetes.io/name: nameOverride,
else gpu-admission (as in the kustomize base).
*/}}
{{- define "gpu-admission.name" -}}
{{- .Values.nameOverride | default "gpu-admission" -}}
{{- end -}}

{{/*
The name of the install's objects and the stem of the others' (NAME-tls, NAME-policy,
...): fullnameOverride, else the chart's name. Not the release's name, as charts made
by `helm create` do: one release per cluster is the sensible count (the webhook
configurations and PriorityClasses are cluster-scoped), and a release of any name keeps
the names the kustomize base, `install` and `certs rotate` use. The replicas are told
it (serve --install-name), as they compare the webhook configurations of that name.
*/}}
{{- define "gpu-admission.fullname" -}}
{{- .Values.fullnameOverride | default (include "gpu-admission.name" .) -}}
{{- end -}}

{{/* The labels Helm's conventions add; selectors never carry them. */}}
{{- define "gpu-admission.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
commonLabels, as YAML (empty when there are none), refusing a label the chart sets itself:
the base's (app.kubernetes.io/name, /component) and Helm's.
*/}}
{{- define "gpu-admission.commonLabels" -}}
{{- $own := concat (list "app.kubernetes.io/name" "app.kubernetes.io/component") (include "gpu-admission.helmLabels" . | fromYaml | keys | sortAlpha) -}}
{{- $why := "is a label the chart sets itself: it cannot be a commonLabel" -}}
{{- include "gpu-admission.extraMetadata" (list "commonLabels" .Values.commonLabels $own $why) -}}
{{- end -}}

{{/* The chart's own labels of every object: the base's, then Helm's. */}}
{{- define "gpu-admission.chartLabels" -}}
app.kubernetes.io/name: {{ include "gpu-admission.name" . }}
{{ include "gpu-admission.helmLabels" . }}
{{- end -}}

{{/* Every object's labels: the chart's, then commonLabels. */}}
{{- define "gpu-admission.labels" -}}
{{ include "gpu-admission.chartLabels" . }}
{{- with include "gpu-admission.commonLabels" . }}
{{ . }}
{{- end -}}
{{- end -}}

{{/* The same, for an object of one component (webhook, metrics, cert-rotation). */}}
{{- define "gpu-admission.componentLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "gpu-admission.name" $root }}
app.kubernetes.io/component: {{ index . 1 }}
{{ include "gpu-admission.helmLabels" $root }}
{{- with include "gpu-admission.commonLabels" $root }}
{{ . }}
{{- end -}}
{{- end -}}

{{/* The replicas: what the Deployment, Services, PDB and NetworkPolicy select. */}}
{{- define "gpu-admission.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-admission.name" . }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/* The image of the replicas, the rotation job and `helm test`'s pod:
[REGISTRY/]REPOSITORY, then @DIGEST or :TAG. */}}
{{- define "gpu-admission.image" -}}
{{- $repository := .Values.image.repository -}}
{{- with .Values.image.registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{ $repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ $repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The namespace of every namespaced object and of every reference to it:
namespaceOverride (an umbrella chart's, say), else the release's. */}}
{{- define "gpu-admission.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
{{- end -}}

{{- define "gpu-admission.serviceAccountName" -}}
{{ .Values.serviceAccount.name | default (include "gpu-admission.fullname" .) }}
{{- end -}}

{{- define "gpu-admission.selfSigned" -}}
{{- if eq .Values.certificates.mode "selfSigned" -}}true{{- else if ne .Values.certificates.mode "certManager" -}}
{{- fail (printf "certificates.mode must be selfSigned or certManager, not %q" .Values.certificates.mode) -}}
{{- end -}}
{{- end -}}

{{/* The Service's DNS names, which the serving certificate must hold. */}}
{{- define "gpu-admission.serviceNames" -}}
{{- $ns := include "gpu-admission.namespace" . -}}
{{- $service := include "gpu-admission.fullname" . -}}
{{- list $service (printf "%s.%s" $service $ns) (printf "%s.%s.svc" $service $ns) (printf "%s.%s.svc.cluster.local" $service $ns) | toJson -}}
{{- end -}}

{{/*
Self-generated certificates, decided once per render and kept in a dict so that the
Secrets and every caBundle agree: what the cluster holds (lookup) when it holds a
usable pair, otherwise a new CA and serving certificate. On an upgrade the Secrets are
read back and written unchanged, whatever `certs rotate` has made of them since, and
the caBundle is the one the configurations already carry (during a CA rotation it
trusts both CAs) as long as it trusts the current CA. `helm template` has no cluster
to read: it shows new certificates each time.
*/}}
{{- define "gpu-admission.certificates" -}}
{{- if not (hasKey .Values "__certificates") -}}
{{- $ns := include "gpu-admission.namespace" . -}}
{{- $fullname := include "gpu-admission.fullname" . -}}
{{- $caSecret := lookup "v1" "Secret" $ns (printf "%s-tls-ca" $fullname) -}}
{{- $tlsSecret := lookup "v1" "Secret" $ns (printf "%s-tls" $fullname) -}}
{{- $certs := dict -}}
{{- if and $caSecret $tlsSecret (index ($caSecret.data | default dict) "ca.crt") (index ($caSecret.data | default dict) "ca.key") (index ($tlsSecret.data | default dict) "tls.crt") (index ($tlsSecret.data | default dict) "tls.key") -}}
{{- $_ := set $certs "caData" $caSecret.data -}}
{{- $_ := set $certs "tlsData" $tlsSecret.data -}}
{{- else -}}
{{- $self := .Values.certificates.selfSigned -}}
{{- /* ECDSA P-256, as `gpu-admission install` and `certs rotate` make them: the
rotation reads these keys back. The CA's name carries its creation time (two CAs
trusted side by side during a CA rotation must not share a name). */ -}}
{{- $caName := printf "gpu-admission CA %s" (now | date "2006-01-02T15:04:05Z") -}}
{{- $ca := genCAWithKey $caName (int $self.caDays) (genPrivateKey "ecdsa") -}}
{{- $names := concat (include "gpu-admission.serviceNames" . | fromJsonArray) $self.extraDNSNames -}}
{{- $leafName := printf "%s.%s.svc" $fullname $ns -}}
{{- $leaf := genSignedCertWithKey $leafName $self.extraIPAddresses $names (int $self.days) $ca (genPrivateKey "ecdsa") -}}
{{- $_ := set $certs "caData" (dict "ca.crt" ($ca.Cert | b64enc) "ca.key" ($ca.Key | b64enc)) -}}
{{- $_ := set $certs "tlsData" (dict "tls.crt" ($leaf.Cert | b64enc) "tls.key" ($leaf.Key | b64enc) "ca.crt" ($ca.Cert | b64enc)) -}}
{{- end -}}
{{- $caPem := index $certs.caData "ca.crt" | b64dec | trim -}}
{{- $bundle := index $certs.caData "ca.crt" -}}
{{- $live := lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" $fullname -}}
{{- range ($live.webhooks | default list) -}}
{{- $current := .clientConfig.caBundle | default "" -}}
{{- if and $current (contains $caPem (b64dec $current)) -}}
{{- $bundle = $current -}}
{{- end -}}
{{- end -}}
{{- $_ := set $certs "caBundle" $bundle -}}
{{- $_ := set .Values "__certificates" $certs -}}
{{- end -}}
{{- index .Values "__certificates" | toJson -}}
{{- end -}}

{{/* A webhook's clientConfig as JSON: the Service (or webhooks.url), and the caBundle. */}}
{{- define "gpu-admission.clientConfig" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- $config := dict -}}
{{- if $root.Values.webhooks.url -}}
{{- $_ := set $config "url" (printf "%s%s" (trimSuffix "/" $root.Values.webhooks.url) $path) -}}
{{- else -}}
{{- $_ := set $config "service" (dict "name" (include "gpu-admission.fullname" $root) "namespace" (include "gpu-admission.namespace" $root) "path" $path "port" 443) -}}
{{- end -}}
{{- if include "gpu-admission.selfSigned" $root -}}
{{- $_ := set $config "caBundle" (include "gpu-admission.certificates" $root | fromJson).caBundle -}}
{{- end -}}
{{- toJson $config -}}
{{- end -}}

{{/*
The namespace opt-in label of the policy in force, as JSON {key, value}: the webhookScope's
(`gpu-admission manifests helm-values` prints it from the policy). scope.namespaceLabel,
when set, must say the same: a chart selecting namespaces by another label than the one
the policy and its documents name would act nowhere the team opted in.
*/}}
{{- define "gpu-admission.optIn" -}}
{{- $scope := include "gpu-admission.webhookScope" . | fromJson -}}
{{- $optIn := $scope.namespaceOptIn -}}
{{- if not $optIn -}}
{{- fail "webhookScope holds no namespaceOptIn: print it again with `gpu-admission manifests helm-values --policy FILE` of this chart's version" -}}
{{- end -}}
{{- $label := .Values.scope.namespaceLabel | default dict -}}
{{- if $label.key -}}
{{- if or (ne $label.key $optIn.key) (ne (toString $label.value) (toString $optIn.value)) -}}
{{- fail (printf "scope.namespaceLabel %s=%s is not the policy's namespaceOptIn %s=%s: the webhooks would act in no namespace the policy's users opt in. Leave scope.namespaceLabel unset (the policy's label is used) or change namespaceOptIn in the policy" $label.key (toString $label.value) $optIn.key (toString $optIn.value)) -}}
{{- end -}}
{{- end -}}
{{- dict "key" $optIn.key "value" (toString $optIn.value) | toJson -}}
{{- end -}}

{{/*
The opted-in webhooks' namespaceSelector: the policy's opt-in label, the expressions of
scope.matchExpressions (a team's own, e.g. a tenancy label), and every excluded namespace.
*/}}
{{- define "gpu-admission.namespaceSelector" -}}
{{- $root := index . 0 -}}
{{- $label := include "gpu-admission.optIn" $root | fromJson -}}
{{- $excluded := concat (list "kube-system" "kube-node-lease") $root.Values.scope.excludedNamespaces (list (include "gpu-admission.namespace" $root)) | uniq -}}
{{- $expressions := list (dict "key" $label.key "operator" "In" "values" (list $label.value)) -}}
{{- $expressions = concat $expressions ($root.Values.scope.matchExpressions | default list) -}}
{{- /* `| default dict`: a release upgraded with --reuse-values from a version without it. */ -}}
{{- $expressions = concat $expressions (index ($root.Values.webhooks.matchExpressions | default dict) (index . 1) | default list) -}}
{{- $expressions = append $expressions (dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" $excluded) -}}
{{- dict "matchExpressions" $expressions | toJson -}}
{{- end -}}

{{- define "gpu-admission.failurePolicy" -}}
{{- $root := index . 0 -}}
{{- $value := index $root.Values.webhooks.failurePolicy (index . 1) | default (index . 2) -}}
{{- if not (has $value (list "Fail" "Ignore")) -}}
{{- fail (printf "webhooks.failurePolicy.%s must be Fail or Ignore, not %q" (index . 1) $value) -}}
{{- end -}}
{{- $value -}}
{{- end -}}

{{- define "gpu-admission.timeoutSeconds" -}}
{{- $root := index . 0 -}}
{{- $value := index $root.Values.webhooks.timeoutSeconds (index . 1) | default (index . 2) | int -}}
{{- if or (lt $value 1) (gt $value 30) -}}
{{- fail (printf "webhooks.timeoutSeconds.%s must be 1 to 30 (kube-apiserver's bounds), not %v" (index . 1) $value) -}}
{{- end -}}
{{- $value -}}
{{- end -}}

{{/* A per-webhook value for a webhook that does not exist is a typo: refuse it; and
namespace expressions for a webhook that selects only the release's namespace. */}}
{{- define "gpu-admission.checkWebhookKeys" -}}
{{- $root := index . 0 -}}
{{- $known := index . 1 -}}
{{- $optedIn := index . 2 -}}
{{- range $setting := list "failurePolicy" "timeoutSeconds" "matchExpressions" -}}
{{- range $key, $_ := index $root.Values.webhooks $setting | default dict -}}
{{- if not (has $key $known) -}}
{{- fail (printf "webhooks.%s.%s: no such webhook (known: %s)" $setting $key (join ", " $known)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $key, $_ := $root.Values.webhooks.matchExpressions | default dict -}}
{{- if not (has $key $optedIn) -}}
{{- fail (printf "webhooks.matchExpressions.%s: that webhook selects the release's namespace only, not opted-in ones (webhooks of opted-in namespaces: %s)" $key (join ", " $optedIn)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A webhook configuration's metadata as JSON; with cert-manager, the annotation
that has its CA injector fill in every caBundle. */}}
{{- define "gpu-admission.webhookMetadata" -}}
{{- $root := . -}}
{{- $metadata := dict "name" (include "gpu-admission.fullname" $root) "labels" (include "gpu-admission.labels" $root | fromYaml) -}}
{{- $annotations := include "gpu-admission.extraMetadata" (list "webhooks.annotations" $root.Values.webhooks.annotations (list "cert-manager.io/inject-ca-from") "cert-manager's CA injection reads it") | fromYaml -}}
{{- if not (include "gpu-admission.selfSigned" $root) -}}
{{- $_ := set $annotations "cert-manager.io/inject-ca-from" (printf "%s/%s" (include "gpu-admission.namespace" $root) (include "gpu-admission.fullname" $root)) -}}
{{- end -}}
{{- if $annotations -}}
{{- $_ := set $metadata "annotations" $annotations -}}
{{- end -}}
{{- toJson $metadata -}}
{{- end -}}

{{- define "gpu-admission.policy" -}}
{{- .Values.policy | default (.Files.Get "files/policy.yaml") -}}
{{- end -}}

{{/*
Labels or annotations from a value, as YAML (empty when there are none), refusing a
key the chart sets itself: (list "VALUE" (the value) (the chart's keys) "WHY").
*/}}
{{- define "gpu-admission.extraMetadata" -}}
{{- $value := index . 0 -}}
{{- $extra := index . 1 | default dict -}}
{{- range $key, $_ := $extra -}}
{{- if has $key (index $ 2) -}}
{{- fail (printf "%s: %s %s" $value $key (index $ 3)) -}}
{{- end -}}
{{- end -}}
{{- with $extra }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* podLabels, never one the replicas are selected by (or the ReplicaSet's hash). */}}
{{- define "gpu-admission.podLabels" -}}
{{- $selector := include "gpu-admission.selectorLabels" . | fromYaml | keys -}}
{{- $why := "is a label the chart sets and selects the replicas by (Deployment, Services, PodDisruptionBudget, NetworkPolicy, topology spread): it cannot be a podLabel" -}}
{{- include "gpu-admission.extraMetadata" (list "podLabels" .Values.podLabels (append $selector "pod-template-hash") $why) -}}
{{- end -}}

{{/* podAnnotations, never the checksum that rolls the replicas on a policy change. */}}
{{- define "gpu-admission.podAnnotations" -}}
{{- $why := "is the annotation that rolls the replicas when the policy changes: it cannot be a podAnnotation" -}}
{{- include "gpu-admission.extraMetadata" (list "podAnnotations" .Values.podAnnotations (list "checksum/policy") $why) -}}
{{- end -}}

{{/*
An object's labels and more from a value (monitoring.*.labels): (list . "VALUE" (the value)).
The value's label wins over a commonLabel of the same key; the chart's own cannot be overridden.
*/}}
{{- define "gpu-admission.labelsWith" -}}
{{- $root := index . 0 -}}
{{- $labels := include "gpu-admission.chartLabels" $root -}}
{{- $why := "is a label the chart sets on every object: it cannot be overridden" -}}
{{- $extra := include "gpu-admission.extraMetadata" (list (index . 1) (index . 2) ($labels | fromYaml | keys) $why) -}}
{{- $common := dict -}}
{{- range $key, $value := include "gpu-admission.commonLabels" $root | fromYaml -}}
{{- if not (hasKey (index $ 2 | default dict) $key) -}}
{{- $_ := set $common $key $value -}}
{{- end -}}
{{- end -}}
{{- $labels -}}
{{- with $common }}
{{ toYaml . }}
{{- end -}}
{{- with $extra }}
{{ . }}
{{- end -}}
{{- end -}}

{{/*
A dict of the chart's with a value merged over it key by key, as Helm merges a value into
its default (podSecurityContext): a map into a map, a key set to null dropped, anything else
replaced. As JSON: (list (the chart's dict) (the value)).
*/}}
{{- define "gpu-admission.merged" -}}
{{- $merged := deepCopy (index . 0) -}}
{{- range $key, $value := index . 1 | default dict -}}
{{- if kindIs "invalid" $value -}}
{{- $_ := unset $merged $key -}}
{{- else if kindIs "map" $value -}}
{{- $base := index $merged $key -}}
{{- $base = ternary $base dict (kindIs "map" $base) -}}
{{- $_ := set $merged $key (include "gpu-admission.merged" (list $base $value) | fromJson) -}}
{{- else -}}
{{- $_ := set $merged $key $value -}}
{{- end -}}
{{- end -}}
{{- toJson $merged -}}
{{- end -}}

{{/*
The alert rules of files/prometheus-rules.yaml as YAML, each alert's runbook_url
<monitoring.runbookBaseUrl>/<alert>.md (one slash between them) when a base is given, and
monitoring.alerts.additionalRuleLabels added to each alert's labels, refusing one an
alert sets itself (severity: Alertmanager routes and the runbooks read it), its name, or
one its expression groups by (`by (namespace, pod)`): a rule's label overrides the
series', so alerts of two pods would become one label set and the rule fail to evaluate.
*/}}
{{- define "gpu-admission.alertRules" -}}
{{- $rules := .Files.Get "files/prometheus-rules.yaml" | fromYaml -}}
{{- $base := regexReplaceAll "/+$" .Values.monitoring.runbookBaseUrl "" -}}
{{- $extra := .Values.monitoring.alerts.additionalRuleLabels | default dict -}}
{{- range $group := $rules.groups -}}
{{- range $rule := $group.rules -}}
{{- if $base -}}
{{- $_ := set $rule.annotations "runbook_url" (printf "%s/%s.md" $base $rule.alert) -}}
{{- end -}}
{{- $own := list "alertname" -}}
{{- range $clause := regexFindAll "by\\s*\\([^)]*\\)" (toString $rule.expr) -1 -}}
{{- range $label := regexReplaceAll "^by\\s*\\(|\\)$" $clause "" | splitList "," -}}
{{- $own = append $own (trim $label) -}}
{{- end -}}
{{- end -}}
{{- range $key, $value := $extra -}}
{{- if or (hasKey $rule.labels $key) (has $key $own) -}}
{{- fail (printf "monitoring.alerts.additionalRuleLabels: %s is a label the alert %s sets itself or groups its series by: it cannot be overridden" $key $rule.alert) -}}
{{- end -}}
{{- $_ := set $rule.labels $key $value -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/*
The replicas' topologySpreadConstraints as YAML: each entry of the value, with the
replicas' selector labels as its labelSelector and pod-template-hash as its
matchLabelKeys where it sets none.
*/}}
{{- define "gpu-admission.topologySpreadConstraints" -}}
{{- $constraints := list -}}
{{- range .Values.topologySpreadConstraints -}}
{{- $constraint := deepCopy . -}}
{{- if not (hasKey $constraint "labelSelector") -}}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" (include "gpu-admission.selectorLabels" $ | fromYaml)) -}}
{{- end -}}
{{- if not (hasKey $constraint "matchLabelKeys") -}}
{{- $_ := set $constraint "matchLabelKeys" (list "pod-template-hash") -}}
{{- end -}}
{{- $constraints = append $constraints $constraint -}}
{{- end -}}
{{- with $constraints }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/*
What the policy in force decides of each webhook (rules, objectSelector, matchConditions),
as JSON: the webhookScope value (`gpu-admission manifests helm-values --policy FILE`
prints it with the policy) or the default policy's (files/webhook-scope.json).
*/}}
{{- define "gpu-admission.webhookScope" -}}
{{- if .Values.webhookScope -}}
{{- toJson .Values.webhookScope -}}
{{- else -}}
{{- .Files.Get "files/webhook-scope.json" -}}
{{- end -}}
{{- end -}}

{{/*
The FlowSchema's resourceRules: every tenant write a webhook of the policy is sent
(webhook/install/flow_control.py tenant_write_rules), from the webhookScope.
*/}}
{{- define "gpu-admission.tenantWriteRules" -}}
{{- $scope := include "gpu-admission.webhookScope" . | fromJson -}}
{{- if not (hasKey $scope "tenantWriteRules") -}}
{{- fail "webhookScope holds no tenantWriteRules: print it again with `gpu-admission manifests helm-values --policy FILE` of this chart's version" -}}
{{- end -}}
{{- toYaml $scope.tenantWriteRules -}}
{{- end -}}

{{/*
The policy ConfigMap's gpu-admission.io/webhook-scope annotation: the sha256 of what the
webhooks rendered here need of the policy (the webhookScope's webhooks and the opt-in
label), as `gpu-admission` computes it of a policy (webhook/install/scope.py
scope_digest: the same JSON, as toJson writes it). The policy ConfigMap's webhook admits
a policy whose annotation is its own scope's digest before this release's webhook
configurations are upgraded; any other it compares with the live configurations.
*/}}
{{- define "gpu-admission.webhookScopeDigest" -}}
{{- $webhooks := (include "gpu-admission.webhookScope" . | fromJson).webhooks | default dict -}}
{{- $optIn := include "gpu-admission.optIn" . | fromJson -}}
{{- printf "sha256:%s" (dict "namespaceOptIn" $optIn "webhooks" $webhooks | toJson | sha256sum) -}}
{{- end -}}

{{/* The scoped fields of one webhook, as YAML: (list . "WEBHOOK NAME"). */}}
{{- define "gpu-admission.scopedFields" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $webhooks := (include "gpu-admission.webhookScope" $root | fromJson).webhooks | default dict -}}
{{- if not (hasKey $webhooks $name) -}}
{{- fail (printf "webhookScope holds no webhook %s: print it again with `gpu-admission manifests helm-values --policy FILE` of this chart's version" $name) -}}
{{- end -}}
{{- $fields := index $webhooks $name -}}
{{- if eq $name "validate-policy.gpu-admission.io" -}}
{{- $_ := set $fields "matchConditions" (list (include "gpu-admission.policyConfigMapCondition" $root | fromJson)) -}}
{{- end -}}
{{- toYaml $fields -}}
{{- end -}}

{{/*
The policy ConfigMap webhook's matchCondition, for this install's ConfigMap
(FULLNAME-policy): webhook.engine.handlers.policy_configmap's, whose scope the replicas
compare (serve --install-name); a unit test holds the two equal.
*/}}
{{- define "gpu-admission.policyConfigMapCondition" -}}
{{- $configmap := printf "%s-policy" (include "gpu-admission.fullname" .) -}}
{{- dict "name" "policy-configmap" "expression" (printf "has(object.metadata.name) && (object.metadata.name == '%s' || object.metadata.name.startsWith('%s-'))" $configmap $configmap) | toJson -}}
{{- end -}}

{{/*
The policy in force and the scope of its webhooks go together: webhooks rendered from
another policy would select pods by a label, taint or resource it does not use.
*/}}
{{- define "gpu-admission.checkWebhookScope" -}}
{{- $scope := include "gpu-admission.webhookScope" . | fromJson -}}
{{- if ne (include "gpu-admission.policy" . | sha256sum) ($scope.policySha256 | default "") -}}
{{- fail "the policy value needs webhook configurations rendered from it: install with `-f VALUES`, where VALUES is what `gpu-admission manifests helm-values --policy FILE` prints (the policy and its webhookScope), instead of `--set-file policy=FILE` alone" -}}
{{- end -}}
{{- end -}}
