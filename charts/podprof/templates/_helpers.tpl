{{/*
Named templates. The public ones can be included from your own chart to add
the podprof sidecar to your workloads; add this chart as a dependency named
"podprof" (its values then live under .Values.podprof) and write:

  spec:
    template:
      metadata:
        annotations:
          {{- include "podprof.annotations" . | nindent 10 }}
      spec:
        shareProcessNamespace: true      # required: podprof sees the app's processes
        initContainers:
          {{- include "podprof.initContainers" . | nindent 10 }}
        containers:
          - name: app
            ...
            env:                                 # the heap agent (agent.preload)
              {{- include "podprof.appEnv" (dict "root" . "container" "app") | nindent 14 }}
            volumeMounts:
              {{- include "podprof.appVolumeMounts" (dict "root" . "container" "app") | nindent 14 }}
          {{- include "podprof.containers" . | nindent 10 }}
        volumes:
          {{- include "podprof.volumes" . | nindent 10 }}

podprof.initContainers renders the sidecar when it runs as a native sidecar
and podprof.containers when it does not (clusters < 1.29), so include both.
podprof.sidecar is the container itself (a list item).
podprof.appEnv and podprof.appVolumeMounts are the LD_PRELOAD entry and the
read-only agent volume for an application container (list items; empty when
nothing is preloaded: agent.preload false, no native sidecar, or a container
not in a non-empty agent.containers). Pass (dict "root" . "container" NAME);
when env or volumeMounts would otherwise be empty, wrap them in `with`
(an empty `env:` renders as null, which Kubernetes accepts). Pass the root context
(.): the templates read .Values.podprof when present, else .Values.
The podprof chart itself renders the ConfigMap they reference.
*/}}

{{/* The podprof values as YAML (from .Values.podprof in a parent chart). */}}
{{- define "podprof.valuesYaml" -}}
{{- if and (hasKey .Values "podprof") (kindIs "map" .Values.podprof) -}}
{{- toYaml .Values.podprof -}}
{{- else -}}
{{- toYaml .Values -}}
{{- end -}}
{{- end -}}

{{/* Name prefix: fullnameOverride, else "<release>-podprof" (the release name alone if it says podprof). */}}
{{- define "podprof.fullname" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- if $v.fullnameOverride -}}
{{- $v.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else if contains "podprof" .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-podprof" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "podprof.configMapName" -}}
{{- include "podprof.fullname" . }}-config
{{- end -}}

{{- define "podprof.labels" -}}
app.kubernetes.io/part-of: podprof
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Effective listen address. */}}
{{- define "podprof.listen" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- if $v.listen -}}
{{- $v.listen -}}
{{- else if or $v.scrape.parca.enabled $v.scrape.alloy.enabled $v.service.enabled -}}
{{- printf ":%d" (int $v.port) -}}
{{- else -}}
{{- printf "127.0.0.1:%d" (int $v.port) -}}
{{- end -}}
{{- end -}}

{{/* The port of the listen address. */}}
{{- define "podprof.port" -}}
{{- include "podprof.listen" . | regexFind "[0-9]+$" -}}
{{- end -}}

{{/* "true" when podprof listens on loopback only (unreachable from the pod IP). */}}
{{- define "podprof.loopback" -}}
{{- $host := regexReplaceAll ":[0-9]+$" (include "podprof.listen" .) "" -}}
{{- if or (hasPrefix "127." $host) (eq $host "localhost") (eq $host "[::1]") -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when the sidecar runs as a native sidecar. */}}
{{- define "podprof.native" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- if eq $v.nativeSidecar "always" -}}
true
{{- else if and (eq $v.nativeSidecar "auto") (semverCompare ">=1.29-0" .Capabilities.KubeVersion.Version) -}}
true
{{- end -}}
{{- end -}}

{{/* "true" when the heap agent is preloaded: agent.preload and a native sidecar
(an ordinary container starts together with the app, the file would be late). */}}
{{- define "podprof.preload" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- $a := default dict $v.agent -}}
{{- if and $a.preload (include "podprof.native" .) -}}
true
{{- end -}}
{{- end -}}

{{/* The agent's directory (agent.dir, default /podprof-agent). */}}
{{- define "podprof.agentDir" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- (default dict $v.agent).dir | default "/podprof-agent" -}}
{{- end -}}

{{/* "true" when container .container of the root context .root gets the agent. */}}
{{- define "podprof.preloadInto" -}}
{{- $v := include "podprof.valuesYaml" .root | fromYaml -}}
{{- $names := default list (default dict $v.agent).containers -}}
{{- if and (include "podprof.preload" .root) (or (not $names) (has .container $names)) -}}
true
{{- end -}}
{{- end -}}

{{/* The LD_PRELOAD env entry for an application container (list item), or nothing.
Takes (dict "root" . "container" NAME). */}}
{{- define "podprof.appEnv" -}}
{{- if include "podprof.preloadInto" . -}}
{{- $v := include "podprof.valuesYaml" .root | fromYaml -}}
{{- $lib := printf "%s/libpodprof-agent.so" (include "podprof.agentDir" .root) -}}
{{- with (default dict $v.agent).ldPreloadAppend -}}
{{- $lib = printf "%s:%s" $lib . -}}
{{- end -}}
# podprof's heap agent, dormant until podprof enables it. A missing file
# is only a loader warning. An existing LD_PRELOAD: agent.ldPreloadAppend.
- name: LD_PRELOAD
  value: {{ $lib | quote }}
{{- end -}}
{{- end -}}

{{/* The read-only agent volume mount for an application container (list item), or nothing.
Takes (dict "root" . "container" NAME). */}}
{{- define "podprof.appVolumeMounts" -}}
{{- if include "podprof.preloadInto" . -}}
- name: podprof-agent
  mountPath: {{ include "podprof.agentDir" .root | quote }}
  readOnly: true
{{- end -}}
{{- end -}}

{{/* podprof.yaml as rendered into the ConfigMap. */}}
{{- define "podprof.configFile" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- $cfg := deepCopy (default dict $v.config) -}}
{{- $_ := set $cfg "listen" (include "podprof.listen" .) -}}
{{- $container := $v.targetContainer -}}
{{- if and (not $container) $v.demo.enabled -}}
{{- $container = "app" -}}
{{- end -}}
{{- if and $container (not $cfg.targets) -}}
{{- $_ := set $cfg "targets" (list (dict "name" $container "container" $container)) -}}
{{- end -}}
{{- if $v.auth.existingSecret -}}
{{- $http := default dict $cfg.http -}}
{{- $_ := set $http "token_file" (printf "/etc/podprof-token/%s" $v.auth.secretKey) -}}
{{- $_ := set $cfg "http" $http -}}
{{- end -}}
{{- /* Clients of the Service send its name as Host: podprof answers 421 to names it does not know. */ -}}
{{- if $v.service.enabled -}}
{{- $http := deepCopy (default dict $cfg.http) -}}
{{- $svc := include "podprof.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $_ := set $http "allowed_hosts" (concat (default list $http.allowed_hosts) $names | uniq) -}}
{{- $_ := set $cfg "http" $http -}}
{{- end -}}
{{- if include "podprof.preload" . -}}
{{- $heap := deepCopy (default dict $cfg.heap) -}}
{{- $_ := set $heap "agent_dir" (include "podprof.agentDir" .) -}}
{{- $_ := set $cfg "heap" $heap -}}
{{- end -}}
# podprof configuration rendered by the podprof Helm chart.
{{ toYaml $cfg }}
{{- end -}}

{{/* Checks shared by every template that renders the sidecar. */}}
{{- define "podprof.validate" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- if and (include "podprof.loopback" .) (or $v.scrape.parca.enabled $v.scrape.alloy.enabled $v.service.enabled) -}}
{{- fail (printf "podprof: listen %q is loopback-only, but scrape or service needs the pod IP: set listen to \":%s\" or leave it empty" (include "podprof.listen" .) (include "podprof.port" .)) -}}
{{- end -}}
{{- end -}}

{{/* Pod annotations: config checksum and scrape annotations (a map, no list). */}}
{{- define "podprof.annotations" -}}
{{- include "podprof.validate" . -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- $port := include "podprof.port" . -}}
checksum/config: {{ include "podprof.configFile" . | sha256sum }}
{{- /* Alloy names a service after the scraped port's container (podprof) without it;
current Grafana configs read the second, OpenTelemetry-based ones the third. */}}
{{- $svc := default (printf "%s/%s" .Release.Namespace .Release.Name) $v.serviceName | quote }}
pyroscope.io/service_name: {{ $svc }}
profiles.grafana.com/service_name: {{ $svc }}
resource.opentelemetry.io/service.name: {{ $svc }}
{{- if $v.scrape.parca.enabled }}
{{- /* No parca.dev/path: Parca's stock chart maps it to __metrics_path__, which
Parca ignores, and podprof serves Parca's default paths. */}}
parca.dev/scrape: "true"
parca.dev/port: {{ $port | quote }}
{{- end }}
{{- if $v.scrape.alloy.enabled }}
{{- $paths := dict "cpu" "profile" "memory" "allocs" "goroutine" "goroutine" "block" "block" "mutex" "mutex" }}
{{- range $v.scrape.alloy.profiles }}
profiles.grafana.com/{{ . }}.scrape: "true"
profiles.grafana.com/{{ . }}.port_name: pprof
profiles.grafana.com/{{ . }}.path: /debug/pprof/{{ get $paths . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The sidecar container, as one list item. */}}
{{- define "podprof.sidecar" -}}
{{- include "podprof.validate" . -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
{{- $adds := concat (list "BPF" "PERFMON" "SYS_PTRACE" "SETUID" "SETGID") (default list $v.extraCapabilities) -}}
- name: podprof
  image: {{ printf "%s:%s" $v.image.repository $v.image.tag | quote }}
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if include "podprof.native" . }}
  # Native sidecar: starts before the app containers and stops after them.
  restartPolicy: Always
  {{- end }}
  args: ["--config", "/etc/podprof/podprof.yaml"]
  ports:
    - name: pprof
      containerPort: {{ include "podprof.port" . }}
      protocol: TCP
  {{- if include "podprof.preload" . }}
  # podprof writes the heap agent into agent.dir before it answers /healthz:
  # the kubelet starts the app containers once this probe succeeds.
  startupProbe:
    exec:
      command: ["/usr/local/bin/podprof", "healthcheck", {{ include "podprof.listen" . | quote }}]
    periodSeconds: {{ (default dict $v.agent.startupProbe).periodSeconds | default 1 }}
    failureThreshold: {{ (default dict $v.agent.startupProbe).failureThreshold | default 60 }}
  {{- end }}
  {{- if and $v.livenessProbe.enabled (not (include "podprof.loopback" .)) }}
  # Lenient: only a hung server fails it. No readiness probe on purpose.
  livenessProbe:
    httpGet:
      path: /healthz
      port: pprof
    initialDelaySeconds: {{ $v.livenessProbe.initialDelaySeconds }}
    periodSeconds: {{ $v.livenessProbe.periodSeconds }}
    timeoutSeconds: {{ $v.livenessProbe.timeoutSeconds }}
    failureThreshold: {{ $v.livenessProbe.failureThreshold }}
  {{- end }}
  resources:
    requests:
      cpu: {{ $v.resources.requests.cpu | quote }}
      memory: {{ $v.resources.requests.memory | quote }}
    {{- if $v.guaranteedQoS }}
    limits:
      cpu: {{ $v.resources.requests.cpu | quote }}
      memory: {{ $v.resources.requests.memory | quote }}
    {{- else if $v.resources.limits }}
    limits:
      {{- toYaml $v.resources.limits | nindent 6 }}
    {{- end }}
  securityContext:
    # uid 0: capabilities added here are lost at exec by a non-root user.
    runAsUser: 0
    runAsNonRoot: false
    privileged: false
    {{- if has "SYS_ADMIN" $adds }}
    # The API server rejects SYS_ADMIN together with allowPrivilegeEscalation: false.
    allowPrivilegeEscalation: true
    {{- else }}
    allowPrivilegeEscalation: false
    {{- end }}
    readOnlyRootFilesystem: true
    capabilities:
      drop: [ALL]
      add:
        {{- range $adds }}
        - {{ . }}
        {{- end }}
    seccompProfile:
      {{- $sp := $v.seccompProfile | default dict }}
      {{- if eq ($sp.type | default "RuntimeDefault") "Localhost" }}
      # deploy/seccomp/podprof.json, installed on the node (values.yaml).
      type: Localhost
      localhostProfile: {{ $sp.localhostProfile | default "podprof.json" | quote }}
      {{- else }}
      type: RuntimeDefault
      {{- end }}
  volumeMounts:
    - name: podprof-config
      mountPath: /etc/podprof
      readOnly: true
    {{- if $v.auth.existingSecret }}
    - name: podprof-token
      mountPath: /etc/podprof-token
      readOnly: true
    {{- end }}
    {{- if include "podprof.preload" . }}
    # podprof writes libpodprof-agent.so here (heap.agent_dir).
    - name: podprof-agent
      mountPath: {{ include "podprof.agentDir" . | quote }}
    {{- end }}
{{- end -}}

{{/* The sidecar if it runs as a native sidecar (for initContainers), else nothing. */}}
{{- define "podprof.initContainers" -}}
{{- if include "podprof.native" . -}}
{{- include "podprof.sidecar" . -}}
{{- end -}}
{{- end -}}

{{/* The sidecar if it runs as an ordinary container (for containers), else nothing. */}}
{{- define "podprof.containers" -}}
{{- if not (include "podprof.native" .) -}}
{{- include "podprof.sidecar" . -}}
{{- end -}}
{{- end -}}

{{/* The sidecar's volumes (list items). */}}
{{- define "podprof.volumes" -}}
{{- $v := include "podprof.valuesYaml" . | fromYaml -}}
- name: podprof-config
  configMap:
    name: {{ include "podprof.configMapName" . }}
{{- if $v.auth.existingSecret }}
- name: podprof-token
  secret:
    secretName: {{ $v.auth.existingSecret }}
    defaultMode: 0400
    items:
      - key: {{ $v.auth.secretKey }}
        path: {{ $v.auth.secretKey }}
{{- end }}
{{- if include "podprof.preload" . }}
- name: podprof-agent
  emptyDir:
    sizeLimit: 16Mi
{{- end }}
{{- end -}}

{{/* Labels of the demo pods. */}}
{{- define "podprof.demoSelector" -}}
app.kubernetes.io/name: {{ include "podprof.fullname" . }}-demo
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
