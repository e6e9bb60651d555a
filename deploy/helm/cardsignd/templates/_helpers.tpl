{{/*
The release's name for every object: fullnameOverride, else the release
name when it already holds the chart's name, else RELEASE-CHART. Kubernetes
names are at most 63 characters (DNS labels).
*/}}
{{- define "cardsignd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "cardsignd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels that select the pods: stable across upgrades. */}}
{{- define "cardsignd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cardsignd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "cardsignd.labels" -}}
{{ include "cardsignd.selectorLabels" . }}
app.kubernetes.io/part-of: cardsign
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "cardsignd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cardsignd.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image: a digest wins over a tag; the tag defaults to appVersion. */}}
{{- define "cardsignd.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "cardsignd.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "cardsignd.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{/*
The key backend the config names (keys.backend, cardsignd's default file).
*/}}
{{- define "cardsignd.keyBackend" -}}
{{- $keys := default (dict) .Values.config.keys -}}
{{- default "file" $keys.backend -}}
{{- end -}}

{{/*
cardsignd.yaml: the config value, with what the chart must own filled in
(listen addresses, TLS files, the PostgreSQL URL). Setting any of those in
config fails the render, naming the value to use instead; so do replicas
that could not share a store and keys.
*/}}
{{- define "cardsignd.config" -}}
{{- $cfg := deepCopy (default (dict) .Values.config) -}}
{{- range $field, $instead := dict "grpc_addr" "the chart listens on 0.0.0.0:7700 (Service <fullname>-grpc)" "http_addr" "the chart listens on 0.0.0.0:7701 (Service <fullname>-jwks)" "data_dir" "the chart passes --data-dir /var/lib/cardsignd/data (persistence.*)" -}}
{{- if hasKey $cfg $field -}}
{{- fail (printf "config.%s: set by the chart, not in config: %s" $field $instead) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $cfg "grpc_addr" "0.0.0.0:7700" -}}
{{- $_ := set $cfg "http_addr" "0.0.0.0:7701" -}}
{{- $tls := default (dict) $cfg.tls -}}
{{- range $field := list "cert_file" "key_file" -}}
{{- if hasKey $tls $field -}}
{{- fail (printf "config.tls.%s: set by the chart from the Secret tls.secretName (or tls.certManager), not in config" $field) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $tls "cert_file" "/etc/cardsignd/tls/tls.crt" -}}
{{- $_ := set $tls "key_file" "/etc/cardsignd/tls/tls.key" -}}
{{- $_ := set $cfg "tls" $tls -}}
{{- /* Vault's Kubernetes auth reads the token vaultToken projects. */ -}}
{{- $hv := default (dict) $cfg.hashivault -}}
{{- $hvAuth := default (dict) $hv.auth -}}
{{- if eq (toString $hvAuth.method) "kubernetes" -}}
{{- if not .Values.vaultToken.enabled -}}
{{- fail "config.hashivault.auth.method: kubernetes needs vaultToken.enabled: true (the pod mounts no other service account token)" -}}
{{- end -}}
{{- if and (hasKey $hvAuth "jwt_file") (ne (toString $hvAuth.jwt_file) "/var/run/secrets/vault/token") -}}
{{- fail "config.hashivault.auth.jwt_file: the chart projects Vault's token at /var/run/secrets/vault/token (vaultToken); leave jwt_file unset" -}}
{{- end -}}
{{- $_ := set $hvAuth "jwt_file" "/var/run/secrets/vault/token" -}}
{{- $_ := set $hv "auth" $hvAuth -}}
{{- $_ := set $cfg "hashivault" $hv -}}
{{- end -}}
{{- $store := default (dict) $cfg.store -}}
{{- if hasKey $store "url" -}}
{{- fail "config.store.url: set by the chart from postgres.url, not in config" -}}
{{- end -}}
{{- if .Values.postgres.enabled -}}
{{- $url := required "postgres.url: the PostgreSQL URL (postgres://ROLE@HOST:PORT/DATABASE?sslmode=verify-full), without its password, when postgres.enabled is true" .Values.postgres.url -}}
{{- if not (regexMatch "^postgres(ql)?://" $url) -}}
{{- fail (printf "postgres.url: %q is not a postgres:// or postgresql:// URL" $url) -}}
{{- end -}}
{{- if or (regexMatch "^postgres(ql)?://[^/@]*:[^/@]*@" $url) (regexMatch "(?i)[?&](ssl)?password=" $url) -}}
{{- fail "postgres.url: carries a password, which would sit in a ConfigMap: put it in the Secret postgres.existingSecret (key postgres.passwordKey)" -}}
{{- end -}}
{{- $_ := set $store "url" $url -}}
{{- $_ := set $cfg "store" $store -}}
{{- else if gt (int .Values.replicaCount) 1 -}}
{{- fail (printf "replicaCount: %d replicas need PostgreSQL (postgres.enabled: true, postgres.url): on the embedded SQLite store each replica would keep its own keys and audit log" (int .Values.replicaCount)) -}}
{{- else if $store -}}
{{- $_ := set $cfg "store" $store -}}
{{- end -}}
{{- if and (gt (int .Values.replicaCount) 1) (eq (include "cardsignd.keyBackend" .) "file") -}}
{{- fail (printf "replicaCount: %d replicas need keys every replica reaches: set config.keys.backend to gcpkms, awskms, azurekv, hashivault or pkcs11 (file keys live on one pod's volume)" (int .Values.replicaCount)) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}
