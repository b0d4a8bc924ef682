{{/* The Spark jobs (spark-on-k8s/): their image, arguments and the SparkApplication
     spec the mirror's SparkApplication and the audit's ScheduledSparkApplication share.
     spark-on-k8s/submit.py builds the same arguments, names and conf from the same
     values (tests/k8s/spark/ compares them). */}}

{{- define "strand.sparkImage" -}}
{{- printf "%s:%s" .Values.spark.image.repository (default .Chart.AppVersion .Values.spark.image.tag) -}}
{{- end -}}

{{/* The jobs' argument table: files/spark-job-arguments.yaml, a copy of
     spark-on-k8s/jobs/arguments.yaml. */}}
{{- define "strand.sparkJobDefinition" -}}
{{- $table := .root.Files.Get "files/spark-job-arguments.yaml" | fromYaml -}}
{{- $definition := index $table.jobs .job -}}
{{- if not $definition -}}
{{- fail (printf "files/spark-job-arguments.yaml defines no job %q" .job) -}}
{{- end -}}
{{- toYaml $definition -}}
{{- end -}}

{{/* The value at a dotted path of a map, "" where a step is missing:
     dict "settings" $map "path" "source.bootstrap", as JSON ({"value": ...}). */}}
{{- define "strand.sparkSetting" -}}
{{- $value := .settings -}}
{{- range splitList "." .path -}}
{{- if kindIs "map" $value -}}
{{- $value = index $value . -}}
{{- else -}}
{{- $value = "" -}}
{{- end -}}
{{- end -}}
{{- dict "value" $value | toJson -}}
{{- end -}}

{{/* Whether a setting is given for its argument type (as submit.py's _is_set). */}}
{{- define "strand.sparkIsSet" -}}
{{- $value := .value -}}
{{- if eq .type "switch" -}}
{{- if and (kindIs "bool" $value) $value }}true{{ end -}}
{{- else if eq .type "list" -}}
{{- if and (kindIs "slice" $value) (gt (len $value) 0) }}true{{ end -}}
{{- else if eq .type "integer" -}}
{{- if not (or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value ""))) }}true{{ end -}}
{{- else -}}
{{- if not (or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value ""))) }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* The job's command-line arguments from its values, as a YAML list:
     dict "root" $ "job" "mirror". The same table and rules as
     spark-on-k8s/submit.py's application_arguments, the same errors. */}}
{{- define "strand.sparkArguments" -}}
{{- $job := .job -}}
{{- $settings := index .root.Values.spark $job -}}
{{- $definition := include "strand.sparkJobDefinition" . | fromYaml -}}
{{- $args := list -}}
{{- range $definition.arguments -}}
{{- $value := (include "strand.sparkSetting" (dict "settings" $settings "path" .setting) | fromJson).value -}}
{{- $what := printf "spark.%s.%s (%s)" $job .setting .flag -}}
{{- if include "strand.sparkIsSet" (dict "type" .type "value" $value) -}}
{{- if eq .type "string" -}}
{{- if not (kindIs "string" $value) -}}{{- fail (printf "%s must be a string" $what) -}}{{- end -}}
{{- $args = append $args (printf "%s=%s" .flag $value) -}}
{{- else if eq .type "integer" -}}
{{- if not (or (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value)) -}}{{- fail (printf "%s must be an integer" $what) -}}{{- end -}}
{{- if ne (float64 $value) (float64 (int64 $value)) -}}{{- fail (printf "%s must be an integer" $what) -}}{{- end -}}
{{- $args = append $args (printf "%s=%d" .flag (int64 $value)) -}}
{{- else if eq .type "list" -}}
{{- $args = append $args (printf "%s=%s" .flag (join "," $value)) -}}
{{- else -}}
{{- $args = append $args .flag -}}
{{- end -}}
{{- else if .required -}}
{{- fail (printf "spark.%s.%s is required by the %s job (%s): set it in your values" $job .setting $job .flag) -}}
{{- end -}}
{{- end -}}
{{- range $group := $definition.exclusive -}}
{{- $chosen := list -}}
{{- range $setting := $group -}}
{{- $value := (include "strand.sparkSetting" (dict "settings" $settings "path" $setting) | fromJson).value -}}
{{- $type := "" -}}
{{- range $definition.arguments }}{{ if eq .setting $setting }}{{ $type = .type }}{{ end }}{{ end -}}
{{- if include "strand.sparkIsSet" (dict "type" $type "value" $value) -}}
{{- $chosen = append $chosen $setting -}}
{{- end -}}
{{- end -}}
{{- if ne (len $chosen) 1 -}}
{{- $names := list -}}
{{- range $group }}{{ $names = append $names (printf "spark.%s.%s" $job .) }}{{ end -}}
{{- fail (printf "the %s job needs exactly one of %s; set: %s" $job (join " or " $names) (default "none" (join ", " $chosen))) -}}
{{- end -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}

{{/* The job's volume on the driver: the mirror's checkpoint, the audit's reports
     (as submit.py's job_volume). */}}
{{- define "strand.sparkVolumeName" -}}
{{- if eq . "mirror" }}checkpoint{{ else }}reports{{ end -}}
{{- end -}}

{{- define "strand.sparkVolumeSettings" -}}
{{- $settings := index .root.Values.spark .job -}}
{{- if eq .job "mirror" }}{{ toYaml $settings.checkpoint.volume }}{{ else }}{{ toYaml $settings.reportDir.volume }}{{ end -}}
{{- end -}}

{{- define "strand.sparkClaimName" -}}
{{- $volume := include "strand.sparkVolumeSettings" . | fromYaml -}}
{{- if $volume.existingClaim -}}
{{- $volume.existingClaim -}}
{{- else -}}
{{- printf "%s-spark-%s-%s" (include "strand.fullname" .root) .job (include "strand.sparkVolumeName" .job) -}}
{{- end -}}
{{- end -}}

{{/* Fail unless the job's path (checkpoint, reports) is on its volume, or an
     object store URI when there is no volume: the driver's root filesystem is
     read-only. The same rule and messages as submit.py's check_job_path. */}}
{{- define "strand.sparkCheckPath" -}}
{{- $settings := index .root.Values.spark .job -}}
{{- $key := ternary "checkpoint" "reportDir" (eq .job "mirror") -}}
{{- $path := (index $settings $key).path -}}
{{- $volume := (index $settings $key).volume -}}
{{- $where := printf "spark.%s.%s" .job $key -}}
{{- if hasPrefix "/" $path -}}
{{- if not $volume.enabled -}}
{{- fail (printf "%s.path %s is a local path but %s.volume.enabled is false: the driver's root filesystem is read-only; give an object store URI or enable the volume" $where $path $where) -}}
{{- else if not (hasPrefix (printf "%s/" (trimSuffix "/" $volume.mountPath)) $path) -}}
{{- fail (printf "%s.path %s is not under %s.volume.mountPath %s: the driver would write it outside its volume" $where $path $where $volume.mountPath) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The PersistentVolumeClaim the chart creates for a job's volume. */}}
{{- define "strand.sparkClaim" -}}
{{- $volume := include "strand.sparkVolumeSettings" . | fromYaml -}}
{{- if and $volume.enabled (not $volume.existingClaim) }}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ include "strand.sparkClaimName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "strand.labels" (dict "root" .root "component" (printf "spark-%s" .job)) | nindent 4 }}
  annotations:
    # The checkpoint / the reports outlive an uninstall, as the storage nodes' data does.
    helm.sh/resource-policy: keep
spec:
  accessModes: [ReadWriteOnce]
  {{- with $volume.storageClassName }}
  storageClassName: {{ . }}
  {{- end }}
  resources:
    requests:
      storage: {{ $volume.size }}
{{- end }}
{{- end -}}

{{- define "strand.sparkPodSecurityContext" -}}
runAsNonRoot: true
runAsUser: 185
runAsGroup: 185
fsGroup: 185
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "strand.sparkContainerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 185
runAsGroup: 185
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* What the driver and the executors share: dict "root" $ "job" "mirror" "pod" .driver */}}
{{- define "strand.sparkPod" -}}
cores: {{ .pod.cores }}
memory: {{ .pod.memory | quote }}
labels:
  {{- include "strand.selectorLabels" (dict "root" .root "component" (printf "spark-%s" .job)) | nindent 2 }}
  app.kubernetes.io/part-of: strand
  {{- with .root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with .root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
podSecurityContext:
  {{- include "strand.sparkPodSecurityContext" . | nindent 2 }}
securityContext:
  {{- include "strand.sparkContainerSecurityContext" . | nindent 2 }}
env:
  - name: STRAND_LOG_LEVEL
    value: {{ .root.Values.logLevel | quote }}
{{- end -}}

{{/* The SparkApplication spec of a job: dict "root" $ "job" "mirror" "restartPolicy" (dict ...) */}}
{{- define "strand.sparkApplicationSpec" -}}
{{- $root := .root -}}
{{- $settings := index $root.Values.spark .job -}}
{{- $definition := include "strand.sparkJobDefinition" . | fromYaml -}}
{{- $volume := include "strand.sparkVolumeSettings" . | fromYaml -}}
{{- $volumeName := include "strand.sparkVolumeName" .job -}}
{{- $fullname := include "strand.fullname" $root -}}
{{- include "strand.sparkCheckPath" . -}}
type: Python
pythonVersion: "3"
mode: cluster
sparkVersion: {{ $root.Values.spark.sparkVersion | quote }}
image: {{ include "strand.sparkImage" $root }}
imagePullPolicy: {{ $root.Values.spark.image.pullPolicy }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
mainApplicationFile: local:///opt/strand/jobs/{{ $definition.file }}
arguments:
  {{- include "strand.sparkArguments" . | nindent 2 }}
{{- with $settings.sparkConf }}
sparkConf:
  {{- range $key, $value := . }}
  {{ $key }}: {{ $value | quote }}
  {{- end }}
{{- end }}
restartPolicy:
  {{- toYaml .restartPolicy | nindent 2 }}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 1Gi
  {{- if $volume.enabled }}
  - name: {{ $volumeName }}
    persistentVolumeClaim:
      claimName: {{ include "strand.sparkClaimName" . }}
  {{- end }}
driver:
  {{- include "strand.sparkPod" (dict "root" $root "job" .job "pod" $settings.driver) | nindent 2 }}
  serviceAccount: {{ $fullname }}-spark
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    {{- if $volume.enabled }}
    - name: {{ $volumeName }}
      mountPath: {{ $volume.mountPath }}
    {{- end }}
executor:
  {{- include "strand.sparkPod" (dict "root" $root "job" .job "pod" $settings.executor) | nindent 2 }}
  instances: {{ $settings.executor.instances }}
  serviceAccount: {{ $fullname }}-spark-executor
  deleteOnTermination: true
  volumeMounts:
    - name: tmp
      mountPath: /tmp
{{- end -}}
