#!/bin/bash
# The Spark image's entry point (spark-on-k8s/Dockerfile), with the conventions of
# Spark on Kubernetes, which starts the image's pods with a first argument of
#   driver ARGS...  the driver pod (cluster mode): spark-submit in client mode inside
#                   the pod, ARGS being spark-submit's (--properties-file, --class,
#                   the job file and its arguments), bound to SPARK_DRIVER_BIND_ADDRESS;
#   executor        an executor pod: the JVM executor backend, configured by the
#                   SPARK_* variables Spark sets on the pod (driver URL, id, cores,
#                   memory, application, pod name and IP; JVM options as
#                   SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in that order);
# and anything else runs as given, so the image also runs the jobs in local mode:
#   python /opt/strand/jobs/mirror.py ... --master local[2]
#   spark-submit --master local[2] /opt/strand/jobs/audit.py ...
# Under tini (when present) as PID 1, so signals reach the JVM and zombies are reaped.
# Tested as processes by tests/k8s/spark/test_image.py.
set -euo pipefail

: "${SPARK_HOME:?SPARK_HOME must name the Spark installation (the image sets it)}"

run() {
    if [ -x /usr/bin/tini ]; then
        exec /usr/bin/tini -s -- "$@"
    fi
    exec "$@"
}

# The JVM's classpath: the Spark conf directory (Spark on Kubernetes mounts the
# driver's properties there), Hadoop's, Spark's jars, and any extra classpath.
classpath() {
    local path="${SPARK_CONF_DIR:-$SPARK_HOME/conf}"
    if [ -n "${HADOOP_CONF_DIR:-}" ]; then
        path="$path:$HADOOP_CONF_DIR"
    fi
    path="$path:$SPARK_HOME/jars/*"
    if [ -n "${SPARK_EXTRA_CLASSPATH:-}" ]; then
        path="$path:$SPARK_EXTRA_CLASSPATH"
    fi
    if [ -n "${SPARK_DIST_CLASSPATH:-}" ]; then
        path="$path:$SPARK_DIST_CLASSPATH"
    fi
    printf '%s' "$path"
}

require() {
    local name
    for name in "$@"; do
        if [ -z "${!name:-}" ]; then
            echo "entrypoint: the executor needs $name, which Spark on Kubernetes sets on" \
                 "its executor pods; to run something else, give its command" >&2
            exit 2
        fi
    done
}

case "${1:-}" in
    driver)
        shift
        : "${SPARK_DRIVER_BIND_ADDRESS:?the driver needs SPARK_DRIVER_BIND_ADDRESS (the pod IP), which Spark on Kubernetes sets}"
        run "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
            --deploy-mode client \
            "$@"
        ;;
    executor)
        shift
        require SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_EXECUTOR_MEMORY \
                SPARK_APPLICATION_ID SPARK_EXECUTOR_POD_IP
        java_options=()
        # SPARK_JAVA_OPT_<n>, in the order of n.
        while IFS= read -r name; do
            java_options+=("${!name}")
        done < <(compgen -e | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4 -n || true)
        run "${JAVA_HOME:+$JAVA_HOME/bin/}java" \
            "${java_options[@]}" \
            "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY" \
            -cp "$(classpath)" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "$SPARK_DRIVER_URL" \
            --executor-id "$SPARK_EXECUTOR_ID" \
            --cores "$SPARK_EXECUTOR_CORES" \
            --app-id "$SPARK_APPLICATION_ID" \
            --hostname "$SPARK_EXECUTOR_POD_IP" \
            --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
            --podName "${SPARK_EXECUTOR_POD_NAME:-$(hostname)}"
        ;;
    "")
        echo "entrypoint: give a command: driver, executor (Spark on Kubernetes), or one to" \
             "run, e.g. python /opt/strand/jobs/mirror.py --help" >&2
        exit 2
        ;;
    *)
        run "$@"
        ;;
esac
