{{/*
Labels on every object: the recommended app.kubernetes.io set, and part-of: tephra as
manifests/kustomization.yaml puts on everything.
*/}}
{{- define "tephra.labels" -}}
app.kubernetes.io/part-of: tephra
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The image reference of a component: tephra.image (dict "image" .Values.scheduler.image "chart" .Chart).
*/}}
{{- define "tephra.image" -}}
{{- printf "%s:%s" .image.repository (default .chart.AppVersion .image.tag) }}
{{- end }}

{{/*
The scheduler's profile names, in order: default-scheduler first in replaceDefault mode, then
schedulerName, then the compatible names. Fails on an unknown mode or a name given twice, which
kube-scheduler would reject at start.
*/}}
{{- define "tephra.schedulerNames" -}}
{{- $names := list -}}
{{- if eq .Values.mode "replaceDefault" -}}
{{- $names = append $names "default-scheduler" -}}
{{- else if ne .Values.mode "secondScheduler" -}}
{{- fail (printf "mode must be secondScheduler or replaceDefault, not %q" .Values.mode) -}}
{{- end -}}
{{- $names = append $names (required "schedulerName is required" .Values.schedulerName) -}}
{{- range .Values.compatibleSchedulerNames -}}
{{- if and (eq . "default-scheduler") (eq $.Values.mode "secondScheduler") -}}
{{- fail "compatibleSchedulerNames: to serve default-scheduler, set mode: replaceDefault (it also takes the kube-scheduler lease)" -}}
{{- end -}}
{{- $names = append $names . -}}
{{- end -}}
{{- if ne (len $names) (len (uniq $names)) -}}
{{- fail (printf "scheduler profile names must differ, got %v (schedulerName and compatibleSchedulerNames)" $names) -}}
{{- end -}}
{{- toJson $names -}}
{{- end }}

{{/*
The scheduler's leader-election lease in kube-system: kube-scheduler's own when Tephra replaces it,
so that the two never schedule at once.
*/}}
{{- define "tephra.schedulerLease" -}}
{{- if eq .Values.mode "replaceDefault" }}kube-scheduler{{ else }}{{ .Values.schedulerName }}{{ end -}}
{{- end }}

{{/*
Fails when a component runs several replicas without leader election: they would all act.
*/}}
{{- define "tephra.checkReplicas" -}}
{{- if and (not .Values.leaderElection.enabled) (or (gt (int .Values.scheduler.replicas) 1) (gt (int .Values.controllers.replicas) 1)) -}}
{{- fail "more than one replica needs leaderElection.enabled: true" -}}
{{- end -}}
{{- end }}

{{/*
The name of the controllers' metrics port, which says whether it is HTTPS.
*/}}
{{- define "tephra.controllersMetricsPort" -}}
{{- if .Values.controllers.metrics.secure }}https-metrics{{ else }}http-metrics{{ end -}}
{{- end }}
