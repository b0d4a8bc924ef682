{{/* Security (values tls, auth, authorization; README.md, "TLS, authentication and
     ACLs"; docs/security.md): the services' TLS flags, the Secrets mounted as files,
     the gateway's authentication and ACL flags, and the checks that refuse settings
     that cannot work. Every secret reaches a pod as a read-only file: flags and
     variables carry paths only. */}}

{{/* Where a pod finds its files: its certificate (tls.crt, tls.key, ca.crt), the
     external etcd's, the bootstrap user's password. */}}
{{- define "strand.tlsDir" -}}/etc/strand/tls{{- end -}}
{{- define "strand.etcdTlsDir" -}}/etc/strand/etcd-tls{{- end -}}
{{- define "strand.superuserDir" -}}/etc/strand/superuser{{- end -}}

{{/* The components with a certificate of their own (serving and calling). */}}
{{- define "strand.tlsServices" -}}
{{- list "storage" "controller" "gateway" "groups" "transactions" | toJson -}}
{{- end -}}

{{/* "true" when the gateway requires client certificates (TLS on). */}}
{{- define "strand.gatewayClientAuth" -}}
{{- if and .Values.tls.enabled .Values.tls.gatewayClientAuth }}true{{ end -}}
{{- end -}}

{{/* The Secret holding a component's certificate: dict "root" $ "component" "storage"
     (the `helm test` pod's: "helm-test", tls.existingSecrets.helmTest). */}}
{{- define "strand.tlsSecret" -}}
{{- if .root.Values.tls.certManager.enabled -}}
{{- printf "%s-%s-tls" (include "strand.fullname" .root) .component -}}
{{- else -}}
{{- $key := ternary "helmTest" .component (eq .component "helm-test") -}}
{{- $secret := index .root.Values.tls.existingSecrets $key -}}
{{- if not $secret -}}
{{- fail (printf "tls.existingSecrets.%s is empty: with tls.enabled and tls.certManager.enabled=false it needs a Secret with tls.crt, tls.key and ca.crt" $key) -}}
{{- end -}}
{{- $secret -}}
{{- end -}}
{{- end -}}

{{/* The services' identities (--tls-service-names): tls.serviceNames, else the
     common names of the chart's certificates. */}}
{{- define "strand.tlsServiceNames" -}}
{{- if .Values.tls.serviceNames -}}
{{- join "," .Values.tls.serviceNames -}}
{{- else -}}
{{- $fullname := include "strand.fullname" . -}}
{{- $names := list -}}
{{- range include "strand.tlsServices" . | fromJsonArray -}}
{{- $names = append $names (printf "%s-%s" $fullname .) -}}
{{- end -}}
{{- join "," $names -}}
{{- end -}}
{{- end -}}

{{/* A Strand service's TLS flags: dict "root" $ "component" "gateway". The internal
     services require the services' certificates with tls.mutual; the gateway
     requires client certificates with tls.gatewayClientAuth only (its clients may
     authenticate with SCRAM instead). */}}
{{- define "strand.serviceTlsArgs" -}}
{{- $values := .root.Values -}}
{{- if $values.tls.enabled -}}
{{- $dir := include "strand.tlsDir" . -}}
{{- $required := ternary (include "strand.gatewayClientAuth" .root) $values.tls.mutual (eq .component "gateway") -}}
- --tls-cert={{ $dir }}/tls.crt
- --tls-key={{ $dir }}/tls.key
- --tls-ca={{ $dir }}/ca.crt
- --tls-health-port={{ $values.tls.healthPort }}
{{- if $required }}
- --tls-client-auth=required
- --tls-service-names={{ include "strand.tlsServiceNames" .root }}
{{- end }}
{{- end -}}
{{- end -}}

{{/* The services' etcd client: TLS to the chart's etcd with their own certificate
     (presented with tls.mutual), or to an external etcd with etcd.external.tls. */}}
{{- define "strand.etcdTlsArgs" -}}
{{- $external := .Values.etcd.external -}}
{{- if $external.endpoints -}}
{{- if $external.tls.secretName -}}
{{- $dir := include "strand.etcdTlsDir" . -}}
- --etcd-tls-ca={{ $dir }}/ca.crt
{{- if $external.tls.clientCertificate }}
- --etcd-tls-cert={{ $dir }}/tls.crt
- --etcd-tls-key={{ $dir }}/tls.key
{{- end }}
{{- end -}}
{{- else if .Values.tls.enabled -}}
{{- $dir := include "strand.tlsDir" . -}}
- --etcd-tls-ca={{ $dir }}/ca.crt
{{- if .Values.tls.mutual }}
- --etcd-tls-cert={{ $dir }}/tls.crt
- --etcd-tls-key={{ $dir }}/tls.key
{{- end }}
{{- end -}}
{{- end -}}

{{/* "true" when the coordinators log in to the gateway with the bootstrap user: SCRAM
     on and no client certificate asked for by the gateway (with one, their service
     certificates make them services of the cluster there). */}}
{{- define "strand.coordinatorsUseScram" -}}
{{- if and .Values.auth.scram.enabled (not (include "strand.gatewayClientAuth" .)) }}true{{ end -}}
{{- end -}}

{{/* The bootstrap user's password Secret (its key: auth.scram.bootstrapUser.passwordKey). */}}
{{- define "strand.superuserSecret" -}}
{{- .Values.auth.scram.bootstrapUser.existingSecret | default (printf "%s-superuser" (include "strand.fullname" .)) -}}
{{- end -}}

{{- define "strand.superuserPasswordFile" -}}
{{- include "strand.superuserDir" . }}/password
{{- end -}}

{{/* The flags a component's security adds: dict "root" $ "component" "controller". */}}
{{- define "strand.securityArgs" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
{{- if and (eq .component "controller") $values.auth.scram.enabled }}
- --bootstrap-user={{ $values.auth.scram.bootstrapUser.name }}
- --bootstrap-password-file={{ include "strand.superuserPasswordFile" $root }}
{{- else if and (has .component (list "groups" "transactions")) (include "strand.coordinatorsUseScram" $root) }}
- --gateway-user={{ $values.auth.scram.bootstrapUser.name }}
- --gateway-password-file={{ include "strand.superuserPasswordFile" $root }}
{{- else if eq .component "gateway" }}
{{- if $values.auth.requireAuthentication }}
- --require-authentication
{{- end }}
{{- if $values.auth.scram.enabled }}
- --session-lifetime={{ $values.auth.scram.sessionLifetimeSeconds }}
{{- end }}
{{- if $values.authorization.enabled }}
- --authorizer=acl
{{- with include "strand.superUsers" $root }}
- --super-users={{ . }}
{{- end }}
{{- if $values.authorization.allowEveryoneIfNoAclFound }}
- --allow-everyone-if-no-acl-found
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The principals the ACLs do not apply to: authorization.superUsers, the bootstrap
     user, and without SCRAM the chart's clients that present their certificates (the
     operator, the `helm test` pod), by the common names the chart's certificates
     have (<fullname>-operator, <fullname>-helm-test; give existing Secrets'
     certificates these names too, or list theirs). */}}
{{- define "strand.superUsers" -}}
{{- $values := .Values -}}
{{- $fullname := include "strand.fullname" . -}}
{{- $users := $values.authorization.superUsers -}}
{{- if $values.auth.scram.enabled -}}
{{- $users = append $users (printf "User:%s" $values.auth.scram.bootstrapUser.name) -}}
{{- end -}}
{{- if and (include "strand.gatewayClientAuth" .) (not $values.auth.scram.enabled) -}}
{{- if $values.operator.enabled -}}
{{- $users = append $users (printf "User:%s-operator" $fullname) -}}
{{- end -}}
{{- $users = append $users (printf "User:%s-helm-test" $fullname) -}}
{{- end -}}
{{- join ";" ($users | uniq) -}}
{{- end -}}

{{/* "true" when a component reads the bootstrap user's password. */}}
{{- define "strand.readsSuperuserPassword" -}}
{{- $values := .root.Values -}}
{{- if eq .component "controller" -}}
{{- if $values.auth.scram.enabled }}true{{ end -}}
{{- else if has .component (list "groups" "transactions") -}}
{{- include "strand.coordinatorsUseScram" .root -}}
{{- else if has .component (list "helm-test" "operator") -}}
{{- if $values.auth.scram.enabled }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* The Secret a client of the gateway (the operator, the `helm test` pod) mounts: its
     own certificate when the gateway asks for one, else only the gateway's ca.crt
     (projected alone: the gateway's key never reaches the client's pod). */}}
{{- define "strand.clientTlsVolume" -}}
{{- $root := .root -}}
- name: tls
  secret:
    defaultMode: 0440
{{- if include "strand.gatewayClientAuth" $root }}
    secretName: {{ include "strand.tlsSecret" . }}
{{- else }}
    secretName: {{ include "strand.tlsSecret" (dict "root" $root "component" "gateway") }}
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}

{{/* The security volumes of a Strand service's pod: dict "root" $ "component" "storage". */}}
{{- define "strand.securityVolumes" -}}
{{- $root := .root -}}
{{- $values := $root.Values -}}
{{- if $values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ include "strand.tlsSecret" . }}
    defaultMode: 0440
{{- end }}
{{- if and $values.etcd.external.endpoints $values.etcd.external.tls.secretName }}
- name: etcd-tls
  secret:
    secretName: {{ $values.etcd.external.tls.secretName }}
    defaultMode: 0440
{{- end }}
{{- include "strand.superuserVolume" . }}
{{- end -}}

{{- define "strand.superuserVolume" -}}
{{- if include "strand.readsSuperuserPassword" . }}
- name: superuser
  secret:
    secretName: {{ include "strand.superuserSecret" .root }}
    defaultMode: 0440
    items:
      - key: {{ .root.Values.auth.scram.bootstrapUser.passwordKey }}
        path: password
{{- end }}
{{- end -}}

{{/* Their mounts, read-only. */}}
{{- define "strand.securityVolumeMounts" -}}
{{- $values := .root.Values -}}
{{- if $values.tls.enabled }}
- name: tls
  mountPath: {{ include "strand.tlsDir" . }}
  readOnly: true
{{- end }}
{{- if and $values.etcd.external.endpoints $values.etcd.external.tls.secretName (ne .component "helm-test") (ne .component "operator") }}
- name: etcd-tls
  mountPath: {{ include "strand.etcdTlsDir" . }}
  readOnly: true
{{- end }}
{{- if include "strand.readsSuperuserPassword" . }}
- name: superuser
  mountPath: {{ include "strand.superuserDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* The Strand ports a service pod declares; with TLS, the plaintext health port
     the probes use. */}}
{{- define "strand.healthPort" -}}
{{- if .Values.tls.enabled }}
- name: health
  containerPort: {{ .Values.tls.healthPort }}
  protocol: TCP
{{- end }}
{{- end -}}

{{/* Settings that cannot work, refused with the value to change. */}}
{{- define "strand.security.validate" -}}
{{- $values := .Values -}}
{{- $certAtGateway := include "strand.gatewayClientAuth" . -}}
{{- $scram := $values.auth.scram.enabled -}}
{{- $anonymousDenied := or $values.auth.requireAuthentication (and $values.authorization.enabled (not $values.authorization.allowEveryoneIfNoAclFound)) -}}
{{- if $values.tls.enabled -}}
{{- range include "strand.tlsServices" . | fromJsonArray -}}
{{- $_ := include "strand.tlsSecret" (dict "root" $ "component" .) -}}
{{- end -}}
{{- if not $values.etcd.external.endpoints -}}
{{- $_ := include "strand.tlsSecret" (dict "root" $ "component" "etcd") -}}
{{- end -}}
{{- if $certAtGateway -}}
{{- $_ := include "strand.tlsSecret" (dict "root" $ "component" "helm-test") -}}
{{- if $values.operator.enabled -}}
{{- $_ := include "strand.tlsSecret" (dict "root" $ "component" "operator") -}}
{{- end -}}
{{- end -}}
{{- if eq (int $values.tls.healthPort) 9090 -}}
{{- fail "tls.healthPort must not be 9090, the services' TLS port" -}}
{{- end -}}
{{- if and $values.metrics.enabled (eq (int $values.tls.healthPort) (int $values.metrics.port)) -}}
{{- fail "tls.healthPort must differ from metrics.port" -}}
{{- end -}}
{{- end -}}
{{- if and $values.auth.requireAuthentication (not $scram) (not $certAtGateway) -}}
{{- fail "auth.requireAuthentication with neither auth.scram.enabled nor tls.gatewayClientAuth: no client could authenticate" -}}
{{- end -}}
{{- if and $anonymousDenied (not $scram) (not $certAtGateway) -}}
{{- fail "authorization.enabled (deny by default) with neither auth.scram.enabled nor tls.gatewayClientAuth: the coordinators and the operator would be User:ANONYMOUS at the gateway and be refused; enable auth.scram (they log in as the bootstrap user) or tls.gatewayClientAuth (they present their certificates)" -}}
{{- end -}}
{{- include "strand.sparkSecurityCheck" . -}}
{{- end -}}

{{/* The Spark jobs speak neither TLS nor SCRAM yet (docs/security.md): refuse a job
     pointed at this release's gateway once that gateway needs either. */}}
{{- define "strand.sparkSecurityCheck" -}}
{{- $values := .Values -}}
{{- if or $values.tls.enabled $values.auth.requireAuthentication $values.authorization.enabled -}}
{{- $gateway := printf "%s-gateway" (include "strand.fullname" .) -}}
{{- range $job := list "mirror" "audit" -}}
{{- $settings := index $values.spark $job -}}
{{- if $settings.enabled -}}
{{- range $side := list "source" "target" -}}
{{- $host := (splitList ":" (toString (index $settings $side).bootstrap)) | first -}}
{{- if or (eq $host $gateway) (hasPrefix (printf "%s." $gateway) $host) -}}
{{- fail (printf "spark.%s.%s.bootstrap is this release's gateway, which needs TLS or authentication: the Spark jobs speak neither yet (docs/security.md); run them against a plaintext gateway" $job $side) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* How a client of the gateway in the chart (the operator, the `helm test` pod)
     reaches it: TLS verified with the CA, its certificate when the gateway asks for
     one, the bootstrap user with SCRAM. As flags (the operator's) or as the strand
     CLI's variables (the `helm test` pod's): dict "root" $ "component" "operator". */}}
{{- define "strand.gatewayClientSettings" -}}
{{- $values := .root.Values -}}
{{- $dir := include "strand.tlsDir" .root -}}
{{- $settings := dict -}}
{{- if $values.tls.enabled -}}
{{- $_ := set $settings "tls-ca" (printf "%s/ca.crt" $dir) -}}
{{- if include "strand.gatewayClientAuth" .root -}}
{{- $_ := set $settings "tls-cert" (printf "%s/tls.crt" $dir) -}}
{{- $_ := set $settings "tls-key" (printf "%s/tls.key" $dir) -}}
{{- end -}}
{{- end -}}
{{- if $values.auth.scram.enabled -}}
{{- $_ := set $settings "user" $values.auth.scram.bootstrapUser.name -}}
{{- $_ := set $settings "password-file" (include "strand.superuserPasswordFile" .root) -}}
{{- end -}}
{{- toJson $settings -}}
{{- end -}}

{{- define "strand.gatewayClientArgs" -}}
{{- range $flag, $value := include "strand.gatewayClientSettings" . | fromJson }}
- --{{ $flag }}={{ $value }}
{{- end }}
{{- end -}}

{{- define "strand.gatewayClientEnv" -}}
{{- range $flag, $value := include "strand.gatewayClientSettings" . | fromJson }}
- name: STRAND_{{ $flag | upper | replace "-" "_" }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/* A gateway client's volumes: its TLS files, the bootstrap user's password. */}}
{{- define "strand.gatewayClientVolumes" -}}
{{- if .root.Values.tls.enabled }}
{{ include "strand.clientTlsVolume" . }}
{{- end }}
{{- include "strand.superuserVolume" . }}
{{- end -}}
