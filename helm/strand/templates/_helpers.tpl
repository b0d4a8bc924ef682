{{/* Names, labels and the pieces every Strand pod shares. */}}

{{- define "strand.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* release-chart, or the release name when it already holds the chart name;
     kept short enough for "-transactions" and a StatefulSet pod suffix. */}}
{{- define "strand.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "strand.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of one component: dict "root" $ "component" "storage". */}}
{{- define "strand.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strand.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "strand.labels" -}}
{{ include "strand.selectorLabels" . }}
helm.sh/chart: {{ include "strand.chart" .root }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: strand
{{- end -}}

{{- define "strand.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The etcd endpoints every service uses: the members' stable names, or the
     external ones. */}}
{{- define "strand.etcdEndpoints" -}}
{{- if .Values.etcd.external.endpoints -}}
{{- join "," .Values.etcd.external.endpoints -}}
{{- else -}}
{{- $fullname := include "strand.fullname" . -}}
{{- $members := list -}}
{{- range $i := until (int .Values.etcd.replicas) -}}
{{- $members = append $members (printf "%s-etcd-%d.%s-etcd-headless.%s.svc.%s:2379" $fullname $i $fullname $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- join "," $members -}}
{{- end -}}
{{- end -}}

{{/* The gateway's Service address: the coordinators' and clients' bootstrap. */}}
{{- define "strand.gatewayAddress" -}}
{{- printf "%s-gateway.%s.svc.%s:%d" (include "strand.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.gateway.service.port) -}}
{{- end -}}

{{- define "strand.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "strand.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Pod-spec fields every pod shares. */}}
{{- define "strand.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
{{- include "strand.podSecurityContext" . | nindent 2 }}
{{- end -}}

{{- define "strand.podMetadata" -}}
labels:
{{- include "strand.selectorLabels" . | nindent 2 }}
  app.kubernetes.io/part-of: strand
{{- if .metrics }}
  strand.io/metrics: "true"
{{- end }}
{{- with .root.Values.podLabels }}
{{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.podAnnotations }}
annotations:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Prefer spreading one component's pods over hosts and zones. */}}
{{- define "strand.spread" -}}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
{{- include "strand.selectorLabels" . | nindent 14 }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
{{- include "strand.selectorLabels" . | nindent 8 }}
{{- end -}}

{{/* Downward-API environment of a Strand service pod. */}}
{{- define "strand.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: STRAND_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- end -}}

{{/* The flags every Strand service takes. */}}
{{- define "strand.commonArgs" -}}
- --etcd={{ include "strand.etcdEndpoints" . }}
- --cluster={{ .Values.clusterName }}
- --listen=0.0.0.0:9090
{{- if .Values.metrics.enabled }}
- --metrics-port={{ .Values.metrics.port }}
{{- end }}
{{- with include "strand.etcdTlsArgs" . }}
{{ . }}
{{- end }}
{{- end -}}

{{- define "strand.ports" -}}
- name: grpc
  containerPort: 9090
  protocol: TCP
{{- if .Values.metrics.enabled }}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end }}
{{- with include "strand.healthPort" . | trim }}
{{ . }}
{{- end }}
{{- end -}}

{{/* gRPC health probes (the standard grpc.health.v1 service on port 9090; with TLS,
     which the kubelet's gRPC probe cannot speak, on the plaintext port serving that
     service alone, tls.healthPort). */}}
{{- define "strand.grpcProbes" -}}
{{- $port := ternary .Values.tls.healthPort 9090 .Values.tls.enabled -}}
readinessProbe:
  grpc:
    port: {{ $port }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
livenessProbe:
  grpc:
    port: {{ $port }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
startupProbe:
  grpc:
    port: {{ $port }}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 60
{{- end -}}

{{/* A Deployment of one stateless Strand service:
     dict "root" $ "component" "controller" "service" "controller" "values" .Values.controller
     "args" (list ...), optionally "ports" (further container ports, YAML)
     With TLS (not the gateway) a StatefulSet under a headless Service instead: the
     others call each pod at the address it advertises, which its certificate must
     name, and a pod IP is known to no certificate; a StatefulSet pod has a stable
     DNS name (strand.advertise). */}}
{{- define "strand.serviceDeployment" -}}
{{- $root := .root -}}
{{- $stateful := and $root.Values.tls.enabled (ne .component "gateway") -}}
{{- if $stateful }}
# {{ .component }}: the pods' stable names (with TLS, what they advertise).
apiVersion: v1
kind: Service
metadata:
  name: {{ include "strand.fullname" $root }}-{{ .component }}-headless
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "strand.labels" . | nindent 4 }}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    {{- include "strand.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: 9090
      targetPort: grpc
---
{{- end }}
apiVersion: apps/v1
kind: {{ ternary "StatefulSet" "Deployment" $stateful }}
metadata:
  name: {{ include "strand.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "strand.labels" . | nindent 4 }}
spec:
  replicas: {{ .values.replicas }}
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      {{- include "strand.selectorLabels" . | nindent 6 }}
  {{- if $stateful }}
  serviceName: {{ include "strand.fullname" $root }}-{{ .component }}-headless
  podManagementPolicy: Parallel
  updateStrategy:
    type: RollingUpdate
  {{- else }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
      maxSurge: 1
  {{- end }}
  template:
    metadata:
      {{- include "strand.podMetadata" (merge (dict "metrics" $root.Values.metrics.enabled) .) | nindent 6 }}
    spec:
      serviceAccountName: {{ include "strand.fullname" $root }}
      automountServiceAccountToken: false
      enableServiceLinks: false
      terminationGracePeriodSeconds: 30
      {{- include "strand.podCommon" $root | nindent 6 }}
      {{- include "strand.spread" . | nindent 6 }}
      containers:
        - name: {{ .component }}
          image: {{ include "strand.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: [strand-service, {{ .service }}]
          args:
            {{- include "strand.commonArgs" $root | nindent 12 }}
            {{- range .args }}
            - {{ . }}
            {{- end }}
            {{- with include "strand.serviceTlsArgs" . | trim }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with include "strand.securityArgs" . | trim }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- range .values.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          env:
            {{- include "strand.podEnv" $root | nindent 12 }}
          ports:
            {{- include "strand.ports" $root | nindent 12 }}
            {{- with .ports }}
            {{- . | nindent 12 }}
            {{- end }}
          {{- include "strand.grpcProbes" $root | nindent 10 }}
          resources:
            {{- toYaml .values.resources | nindent 12 }}
          securityContext:
            {{- include "strand.containerSecurityContext" $root | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with include "strand.securityVolumeMounts" . | trim }}
            {{- . | nindent 12 }}
            {{- end }}
      volumes:
        - name: tmp
          emptyDir:
            sizeLimit: 64Mi
        {{- with include "strand.securityVolumes" . | trim }}
        {{- . | nindent 8 }}
        {{- end }}
{{- end -}}

{{/* The address a controller or coordinator advertises: its pod IP, or with TLS its
     StatefulSet pod's DNS name (which its certificate covers):
     dict "root" $ "component" "controller". */}}
{{- define "strand.advertise" -}}
{{- if .root.Values.tls.enabled -}}
--advertise=$(POD_NAME).{{ include "strand.fullname" .root }}-{{ .component }}-headless.$(POD_NAMESPACE).svc.{{ .root.Values.clusterDomain }}:9090
{{- else -}}
--advertise=$(POD_IP):9090
{{- end -}}
{{- end -}}

{{/* A PodDisruptionBudget of one component: at most one pod down at a time. */}}
{{- define "strand.pdb" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "strand.fullname" .root }}-{{ .component }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "strand.labels" . | nindent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      {{- include "strand.selectorLabels" . | nindent 6 }}
{{- end -}}

{{/* What automountServiceAccountToken would mount, for the one container that
     talks to the API (mounted at /var/run/secrets/kubernetes.io/serviceaccount). */}}
{{- define "strand.apiTokenVolume" -}}
- name: api-token
  projected:
    defaultMode: 0444
    sources:
      - serviceAccountToken:
          path: token
          expirationSeconds: 3607
      - configMap:
          name: kube-root-ca.crt
          items:
            - key: ca.crt
              path: ca.crt
      - downwardAPI:
          items:
            - path: namespace
              fieldRef:
                fieldPath: metadata.namespace
{{- end -}}
