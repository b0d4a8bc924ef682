{{/* The gateway's Kafka listener (values gateway.kafka; docs/kafka.md, "On
     Kubernetes"). Every gateway answers Kafka's Metadata with one broker, id 0, at
     the advertised address, so that address must be in front of all the gateways
     and reachable from wherever Kafka clients run: the gateway Service inside the
     cluster, or the external address (gateway.kafka.external) for both inside and
     outside — a gateway advertises one address. */}}

{{/* "true" when the gateways serve Kafka's protocol. With tls.enabled the gateway
     serves TLS on it too, with the certificate, CA and client-certificate check of
     its gRPC listener (its --tls-* flags): no flag of its own. */}}
{{- define "strand.kafkaEnabled" -}}
{{- if .Values.gateway.kafka.enabled }}true{{ end -}}
{{- end -}}

{{/* The port the advertised address has by default: the external Service's (its
     port, or its node port) with gateway.kafka.external, else the gateway Service's. */}}
{{- define "strand.kafkaDefaultAdvertisedPort" -}}
{{- $kafka := .Values.gateway.kafka -}}
{{- if not $kafka.external.enabled -}}
{{- $kafka.port -}}
{{- else if eq $kafka.external.type "NodePort" -}}
{{- $kafka.external.nodePort -}}
{{- else -}}
{{- $kafka.external.port -}}
{{- end -}}
{{- end -}}

{{/* HOST:PORT the gateways advertise (--kafka-advertise): gateway.kafka.advertisedHost
     and advertisedPort, by default the gateway Service's in-cluster DNS name and port. */}}
{{- define "strand.kafkaAdvertise" -}}
{{- $kafka := .Values.gateway.kafka -}}
{{- $host := $kafka.advertisedHost | default (printf "%s-gateway.%s.svc.%s" (include "strand.fullname" .) .Release.Namespace .Values.clusterDomain) -}}
{{- $port := int $kafka.advertisedPort | default (int (include "strand.kafkaDefaultAdvertisedPort" .)) -}}
{{- if contains ":" $host -}}
{{- printf "[%s]:%d" $host $port -}}
{{- else -}}
{{- printf "%s:%d" $host $port -}}
{{- end -}}
{{- end -}}

{{/* The gateway's Kafka flags (a JSON list; empty without the listener). */}}
{{- define "strand.kafkaArgs" -}}
{{- $args := list -}}
{{- if include "strand.kafkaEnabled" . -}}
{{- $kafka := .Values.gateway.kafka -}}
{{- $args = list (printf "--kafka-listen=0.0.0.0:%d" (int $kafka.port)) (printf "--kafka-advertise=%s" (include "strand.kafkaAdvertise" .)) (printf "--kafka-max-request-bytes=%d" (int $kafka.maxRequestBytes)) -}}
{{- end -}}
{{- toJson $args -}}
{{- end -}}

{{/* The gateway container's Kafka port (empty without the listener). */}}
{{- define "strand.kafkaContainerPorts" -}}
{{- if include "strand.kafkaEnabled" . }}
- name: kafka
  containerPort: {{ .Values.gateway.kafka.port }}
  protocol: TCP
{{- end }}
{{- end -}}

{{/* Settings that cannot work, refused with the value to change. */}}
{{- define "strand.kafka.validate" -}}
{{- $kafka := .Values.gateway.kafka -}}
{{- if include "strand.kafkaEnabled" . -}}
{{- $port := int $kafka.port -}}
{{- $taken := dict "9090" "the services' gRPC port" -}}
{{- if .Values.metrics.enabled -}}
{{- $_ := set $taken (toString (int .Values.metrics.port)) "metrics.port" -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- $_ := set $taken (toString (int .Values.tls.healthPort)) "tls.healthPort" -}}
{{- end -}}
{{- with index $taken (toString $port) -}}
{{- fail (printf "gateway.kafka.port %d is already %s: give the Kafka listener a port of its own (9093 by default)" $port .) -}}
{{- end -}}
{{- if and $kafka.external.enabled (not $kafka.advertisedHost) -}}
{{- fail "gateway.kafka.external.enabled needs gateway.kafka.advertisedHost: the load balancer's DNS name or IP (for NodePort, a node's) that Kafka clients reach the gateways at. Every Kafka client connects to that one address after bootstrapping, so it must resolve inside the cluster too (docs/kafka.md, \"On Kubernetes\")" -}}
{{- end -}}
{{- if and $kafka.external.enabled (eq $kafka.external.type "NodePort") (not (int $kafka.external.nodePort)) -}}
{{- fail "gateway.kafka.external.type NodePort needs gateway.kafka.external.nodePort (30000-32767): the node port is advertised, so it cannot be left to Kubernetes to pick" -}}
{{- end -}}
{{- if and $kafka.external.enabled (eq $kafka.external.type "NodePort") $kafka.external.loadBalancerSourceRanges -}}
{{- fail "gateway.kafka.external.loadBalancerSourceRanges applies to type LoadBalancer only: with NodePort, limit the clients with networkPolicy.gatewayFrom or the nodes' firewall" -}}
{{- end -}}
{{- else if or $kafka.external.enabled $kafka.advertisedHost (int $kafka.advertisedPort) -}}
{{- fail "gateway.kafka.external.enabled, advertisedHost and advertisedPort need gateway.kafka.enabled=true (the gateways serve no Kafka listener without it)" -}}
{{- end -}}
{{- end -}}
