#!/usr/bin/env bash
# Re-creates the tool-output files of the false-alarm corpus (see README.md)
# by running the tools on this machine. Not run by CI: the output depends on
# the tools' versions, and some need packages CI does not install
# (kubectl, gcloud, docker, aws, terraform, go, java, node, openssh-server,
# strace). Everything runs offline against 127.0.0.1 or a scratch folder;
# no file holds a credential of the machine that recorded it.
#
#   core/tests/corpus/record.sh [NAME...]   # all files, or only those named
#
# Each recorder writes one file, capped at 1 MiB (`cap`). Lines that are
# secrets on purpose (a request signature computed from made-up keys, a TLS
# session's master key) are left out by `drop_secret_lines`, which prints
# what it dropped, so the corpus stays a corpus of ordinary text.
set -u
here=$(cd "$(dirname "$0")" && pwd)
scratch=${SCRATCH:-/tmp/spillguard-corpus-record}
mkdir -p "$scratch"
cap_bytes=$((1024 * 1024))

# Keeps the first 1 MiB of stdin, cut at the end of a line.
cap() {
    head -c "$cap_bytes" | python3 -c '
import sys
data = sys.stdin.buffer.read()
if len(data) >= '"$cap_bytes"':
    data = data[: data.rfind(b"\n") + 1]
sys.stdout.buffer.write(data)'
}

# Runs a command line in a terminal (colours, `\r\n` line ends).
tty_run() {
    script -qfec "$1" /dev/null
}

# Removes the lines matching the pattern $1 from stdin, and the line after
# one that ends in `Signature:` (botocore prints the signature on its own
# line), and reports them on stderr.
drop_secret_lines() {
    python3 -c '
import re, sys
pattern = re.compile(sys.argv[1].encode())
drop_next = False
for line in sys.stdin.buffer:
    if drop_next or pattern.search(line):
        sys.stderr.buffer.write(b"dropped: " + line.rstrip() + b"\n")
    else:
        sys.stdout.buffer.write(line)
    drop_next = line.rstrip().endswith(b"Signature:")' "$1"
}

# Prints a heading naming the command, as a shell transcript would.
say() { printf '$ %s\n' "$*"; }

# An empty configuration for every cloud client: no file of this machine
# is read.
export CLOUDSDK_CONFIG="$scratch/gcloud-config"
export KUBECONFIG="$scratch/kubeconfig"
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE
export DOCKER_CONFIG="$scratch/docker-config" PAGER=cat
mkdir -p "$CLOUDSDK_CONFIG" "$DOCKER_CONFIG"

rec_kubectl_help() {
    for sub in "" get describe create "create deployment" "create service clusterip" \
        "create configmap" "create secret generic" "create job" "create cronjob" apply \
        "apply view-last-applied" delete edit expose run set "set image" \
        "set resources" rollout "rollout status" "rollout undo" scale autoscale \
        logs exec port-forward proxy cp attach auth "auth can-i" top cordon \
        drain taint label annotate patch replace wait diff kustomize config \
        "config set-credentials" "config set-cluster" "config view" \
        api-resources api-versions cluster-info certificate debug events \
        explain plugin version completion options; do
        say kubectl $sub --help
        kubectl $sub --help 2>&1
    done |
        # An example password in `config set-credentials`, random-looking
        # on purpose: a secret's shape.
        drop_secret_lines 'password=uXFGweU9l35qcif'
}

rec_kubectl_dry_run() {
    cat >"$KUBECONFIG" <<'EOF'
apiVersion: v1
kind: Config
clusters:
- cluster:
    server: http://127.0.0.1:9
  name: local
contexts:
- context:
    cluster: local
    namespace: shop
    user: nobody
  name: local
current-context: local
users:
- name: nobody
  user: {}
EOF
    local dir="$scratch/manifests"
    mkdir -p "$dir"
    cat >"$dir/app.yaml" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: checkout-api
  labels: {app: checkout-api, tier: backend}
spec:
  replicas: 3
  selector:
    matchLabels: {app: checkout-api}
  template:
    metadata:
      labels: {app: checkout-api, tier: backend}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: "9102"
    spec:
      serviceAccountName: checkout-api
      containers:
      - name: api
        image: registry.example.com/shop/checkout-api:1.14.2@sha256:3f1e0a7c9b8d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f
        ports: [{containerPort: 8080, name: http}]
        env:
        - name: DB_HOST
          value: postgres.shop.svc.cluster.local
        - name: DB_PASSWORD
          valueFrom:
            secretKeyRef: {name: checkout-db, key: password}
        - name: API_TOKEN_FILE
          value: /var/run/secrets/checkout/token
        resources:
          requests: {cpu: 250m, memory: 256Mi}
          limits: {cpu: "1", memory: 512Mi}
        readinessProbe:
          httpGet: {path: /healthz, port: http}
        volumeMounts:
        - {name: token, mountPath: /var/run/secrets/checkout, readOnly: true}
      volumes:
      - name: token
        secret: {secretName: checkout-token}
---
apiVersion: v1
kind: Service
metadata:
  name: checkout-api
spec:
  selector: {app: checkout-api}
  ports:
  - {name: http, port: 80, targetPort: http}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: checkout-config
data:
  LOG_LEVEL: info
  FEATURE_FLAGS: "new-cart,express-pay"
  token_ttl: 15m
  session_cookie_name: checkout_session
  application.yaml: |
    server:
      port: 8080
    auth:
      issuer: https://login.example.com/
      audience: checkout
      jwks_uri: https://login.example.com/.well-known/jwks.json
EOF
    for cmd in \
        "create deployment web --image=nginx:1.27 --replicas=2 --port=80 --dry-run=client -o yaml" \
        "create deployment web --image=nginx:1.27 --dry-run=client -o json" \
        "create service clusterip web --tcp=80:8080 --dry-run=client -o yaml" \
        "create service nodeport web --tcp=443:8443 --dry-run=client -o yaml" \
        "create configmap web-config --from-literal=LOG_LEVEL=debug --from-literal=token_ttl=15m --dry-run=client -o yaml" \
        "create configmap manifests --from-file=$dir/app.yaml --dry-run=client -o yaml" \
        "create job nightly --image=busybox:1.36 --dry-run=client -o yaml -- date" \
        "create cronjob nightly --image=busybox:1.36 --schedule='*/5 * * * *' --dry-run=client -o yaml -- date" \
        "create namespace shop --dry-run=client -o yaml" \
        "create serviceaccount checkout-api --dry-run=client -o yaml" \
        "create role pod-reader --verb=get,list,watch --resource=pods --dry-run=client -o yaml" \
        "create rolebinding read-pods --role=pod-reader --serviceaccount=shop:checkout-api --dry-run=client -o yaml" \
        "create ingress web --rule='shop.example.com/*=web:80' --dry-run=client -o yaml" \
        "create priorityclass high --value=1000 --dry-run=client -o yaml" \
        "create quota small --hard=cpu=2,memory=2Gi,pods=10 --dry-run=client -o yaml" \
        "create poddisruptionbudget web --selector=app=web --min-available=1 --dry-run=client -o yaml" \
        "run debug --image=busybox:1.36 --restart=Never --dry-run=client -o yaml -- sleep 3600" \
        "apply --dry-run=client -o yaml -f $dir/app.yaml" \
        "apply --dry-run=client -o json -f $dir/app.yaml" \
        "apply --dry-run=client --validate=false -o yaml -f $dir/app.yaml" \
        "explain deployment.spec.template.spec.containers" \
        "config view" \
        "--v=8 get pods" \
        "--v=6 apply --dry-run=server -f $dir/app.yaml"; do
        say kubectl "$cmd"
        eval "kubectl $cmd" 2>&1
    done
}

rec_gcloud_help() {
    for sub in "" compute "compute instances" "compute instances create" \
        "compute instances list" "compute ssh" "compute firewall-rules create" \
        "container clusters create" "container clusters get-credentials" \
        "iam service-accounts keys create" "iam roles create" \
        "secrets versions access" "secrets create" "run deploy" "functions deploy" \
        "storage cp" "storage buckets create" "sql instances create" \
        "sql users set-password" "auth login" "auth print-access-token" \
        "config set" "projects add-iam-policy-binding" "kms encrypt" \
        "logging read" "pubsub topics publish" "builds submit" \
        "artifacts docker images list" "dns record-sets create"; do
        say gcloud $sub --help
        gcloud $sub --help 2>&1
    done |
        # The `sql instances create` examples pass a literal root password.
        drop_secret_lines 'root-password=password123' | cap
}

rec_docker_help() {
    for sub in "" run build buildx "buildx build" compose "compose up" exec ps \
        images pull push login logout logs inspect network "network create" \
        volume "volume create" system "system prune" container "container ls" \
        image "image ls" tag rm rmi stop start restart kill cp commit save load \
        export import stats top events history info version context "context create" \
        manifest secret "secret create" config swarm service "service create" stack \
        node plugin trust search wait port pause update attach diff; do
        say docker $sub --help
        docker $sub --help 2>&1
    done
    for sub in "info" "ps -a" "images" "version" "network ls"; do
        say docker $sub
        docker $sub 2>&1
    done
}

rec_aws_help() {
    # Not the pages whose examples print credentials (`sts assume-role`,
    # `iam create-access-key`, `secretsmanager get-secret-value`): their
    # example keys are secret-shaped on purpose.
    for page in "" "s3" "s3 cp" "s3 sync" "s3 ls" "s3api put-object" "sts" \
        "sts get-caller-identity" "ec2 run-instances" "configure" \
        "ecr get-login-password" "eks update-kubeconfig" "cloudformation deploy" \
        "lambda invoke"; do
        say aws $page help
        aws $page help 2>&1
    done | cap
}

rec_aws_debug() {
    say aws --debug sts get-caller-identity --endpoint-url http://127.0.0.1:9 --no-sign-request
    aws --debug --cli-connect-timeout 1 --region eu-west-1 sts get-caller-identity \
        --endpoint-url http://127.0.0.1:9 --no-sign-request 2>&1
    say aws --debug s3 ls s3://example-bucket --endpoint-url http://127.0.0.1:9
    aws --debug --cli-connect-timeout 1 --region eu-west-1 s3 ls s3://example-bucket \
        --endpoint-url http://127.0.0.1:9 2>&1
    # With made-up keys the request is signed: the signing lines and the
    # keys themselves are secrets, left out.
    say AWS_ACCESS_KEY_ID=... aws --debug sts get-caller-identity --endpoint-url http://127.0.0.1:9
    AWS_ACCESS_KEY_ID=AKIAZZZZZZZZZZZZZZZZ AWS_SECRET_ACCESS_KEY=zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz \
        aws --debug --cli-connect-timeout 1 --region eu-west-1 sts get-caller-identity \
        --endpoint-url http://127.0.0.1:9 2>&1 |
        drop_secret_lines 'Signature=|Authorization|AKIAZ|zzzzzzzz|Credential='
}

rec_curl_verbose() {
    local dir="$scratch/www" port=18081
    mkdir -p "$dir/docs"
    printf '<html><body>hello</body></html>\n' >"$dir/index.html"
    printf '{"name": "corpus", "version": "1.0.0"}\n' >"$dir/docs/package.json"
    (cd "$dir" && exec python3 -m http.server "$port" --bind 127.0.0.1) >"$scratch/http.log" 2>&1 &
    local server=$!
    sleep 1
    for args in "-v http://127.0.0.1:$port/" "-v http://127.0.0.1:$port/docs" \
        "-v -L http://127.0.0.1:$port/docs" "-v -I http://127.0.0.1:$port/docs/package.json" \
        "-v http://127.0.0.1:$port/missing" \
        "-v -H Accept:application/json -A corpus-recorder/1.0 http://127.0.0.1:$port/docs/package.json" \
        "-v -X POST -d name=corpus http://127.0.0.1:$port/" \
        "--trace-ascii - http://127.0.0.1:$port/docs/package.json" \
        "-sv -o /dev/null http://127.0.0.1:9/" \
        "-v --connect-timeout 2 https://127.0.0.1:$port/"; do
        say curl $args
        curl $args 2>&1
    done
    say 'python3 -m http.server (its log)'
    kill "$server"
    wait "$server" 2>/dev/null
    cat "$scratch/http.log"
}

rec_ssh_verbose() {
    local dir="$scratch/sshd" port=12222
    rm -rf "$dir"
    mkdir -p "$dir"
    # Throwaway host keys in the scratch folder; their private halves are
    # never printed.
    ssh-keygen -q -t ed25519 -N '' -f "$dir/host_ed25519" >/dev/null
    ssh-keygen -q -t rsa -b 3072 -N '' -f "$dir/host_rsa" >/dev/null
    cat >"$dir/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_ed25519
HostKey $dir/host_rsa
PidFile $dir/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
EOF
    mkdir -p /run/sshd
    /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
    sleep 1
    say ssh -vvv -o BatchMode=yes -p $port nobody@127.0.0.1 true
    ssh -vvv -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile="$dir/known_hosts" -p "$port" nobody@127.0.0.1 true 2>&1
    say ssh -v -o BatchMode=yes -p $port corpus@127.0.0.1 true
    ssh -v -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes \
        -o UserKnownHostsFile="$dir/known_hosts" -p "$port" corpus@127.0.0.1 true 2>&1
    say ssh -v -o BatchMode=yes -p 9 127.0.0.1 true
    ssh -v -F /dev/null -o BatchMode=yes -o ConnectTimeout=2 -p 9 127.0.0.1 true 2>&1
    kill "$(cat "$dir/sshd.pid")"
    say "sshd -E (its log)"
    cat "$dir/sshd.log"
}

rec_terraform_plan() {
    local dir="$scratch/terraform"
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/main.tf" <<'EOF'
variable "environment" {
  type    = string
  default = "staging"
}

variable "db_password" {
  type      = string
  sensitive = true
  default   = "not-used-in-this-plan"
}

locals {
  services = {
    checkout = { replicas = 3, port = 8080 }
    payments = { replicas = 2, port = 8443 }
    search   = { replicas = 4, port = 9200 }
  }
  common_tags = {
    environment = var.environment
    managed_by  = "terraform"
    cost_center = "cc-4521"
  }
}

resource "terraform_data" "service" {
  for_each = local.services
  input = merge(local.common_tags, {
    name     = each.key
    replicas = each.value.replicas
    port     = each.value.port
    url      = "https://${each.key}.${var.environment}.example.com:${each.value.port}/"
  })
}

resource "terraform_data" "database" {
  input = {
    engine                  = "postgres"
    version                 = "16.2"
    credentials_secret_name = "checkout-db"
  }
}

output "service_urls" {
  value = { for k, v in terraform_data.service : k => v.output.url }
}

output "database_password" {
  value     = var.db_password
  sensitive = true
}
EOF
    cd "$dir" || return
    for cmd in "terraform init" "terraform validate" "terraform plan" \
        "terraform apply -auto-approve" "terraform output" "terraform show" \
        "terraform plan -var environment=production" "terraform state list" \
        "terraform destroy -auto-approve"; do
        say "$cmd"
        TF_CLI_CONFIG_FILE=/dev/null tty_run "$cmd"
    done
    cd - >/dev/null || return
}

rec_go_errors() {
    local dir="$scratch/go"
    rm -rf "$dir"
    mkdir -p "$dir/panic" "$dir/vet" "$dir/build"
    export GOPATH="$scratch/gopath" GOCACHE="$scratch/gocache" GOFLAGS=-mod=mod GOPROXY=off
    (cd "$dir/panic" && go mod init example.com/panic >/dev/null 2>&1)
    cat >"$dir/panic/main.go" <<'EOF'
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
)

type Config struct {
	Listen  string            `json:"listen"`
	Headers map[string]string `json:"headers"`
	Limits  []int             `json:"limits"`
}

func load(path string) *Config {
	var c *Config
	data, err := os.ReadFile(path)
	if err == nil {
		_ = json.Unmarshal(data, &c)
	}
	return c
}

func worker(id int, wg *sync.WaitGroup, cfg *Config) {
	defer wg.Done()
	fmt.Printf("worker %d limit %d\n", id, cfg.Limits[id])
}

func main() {
	req, _ := http.NewRequest("GET", "http://127.0.0.1:9/api/v1/items?page=2", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "corpus/1.0")
	fmt.Printf("%+v\n", req.Header)
	_, err := http.DefaultClient.Do(req)
	fmt.Printf("request failed: %v\n", err)
	if len(os.Args) > 1 && os.Args[1] == "nil" {
		cfg := load("/nonexistent/config.json")
		fmt.Println(cfg.Listen)
	}
	cfg := &Config{Listen: ":8080", Limits: []int{10, 20}}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go worker(i, &wg, cfg)
		wg.Wait()
	}
}
EOF
    cd "$dir/panic" || return
    say go run . nil
    go run . nil 2>&1
    say go run .
    go run . 2>&1
    say GOTRACEBACK=all go run .
    GOTRACEBACK=all go run . 2>&1
    cd - >/dev/null || return
    (cd "$dir/vet" && go mod init example.com/vet >/dev/null 2>&1)
    cat >"$dir/vet/main.go" <<'EOF'
package main

import (
	"fmt"
	"sync"
)

type counter struct {
	mu sync.Mutex
	n  int
}

func show(c counter) { fmt.Printf("%d\n", c.n, "extra") }

func main() {
	c := counter{}
	show(c)
	fmt.Printf("%s\n", 42)
	x := 1
	x = x
	for i := 0; i < 3; i++ {
		defer func() { fmt.Println(i) }()
	}
}
EOF
    (cd "$dir/build" && go mod init example.com/build >/dev/null 2>&1)
    cat >"$dir/build/main.go" <<'EOF'
package main

import (
	"fmt"
	"os"
	"strings"
)

func tokenCount(s string) int { return len(strings.Fields(s)) }

func main() {
	var total int = "many"
	count := tokenCount(os.Args)
	fmt.Println(total, count, undefinedName)
}
EOF
    say go vet ./...
    (cd "$dir/vet" && go vet ./... 2>&1)
    say go build ./...
    (cd "$dir/build" && go build ./... 2>&1)
    say go env
    go env 2>&1
    say go version -m "$(command -v go)"
    go version -m "$(command -v go)" 2>&1
    say go build -a -x -v .
    (cd "$dir/vet" && rm -rf "$GOCACHE" && go build -a -x -v -o /dev/null . 2>&1)
    unset GOPATH GOCACHE GOFLAGS GOPROXY
}

rec_java_exceptions() {
    local dir="$scratch/java"
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/Orders.java" <<'EOF'
import java.io.*;
import java.net.*;
import java.util.*;
import java.util.concurrent.*;

public class Orders {
    static class OrderException extends Exception {
        OrderException(String message, Throwable cause) { super(message, cause); }
    }

    static Properties loadConfig(String path) throws IOException {
        try (InputStream in = new FileInputStream(path)) {
            Properties p = new Properties();
            p.load(in);
            return p;
        }
    }

    static int connect(String host, int port) throws IOException {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 1000);
            return s.getLocalPort();
        }
    }

    static void placeOrder(String id) throws OrderException {
        try {
            loadConfig("/etc/orders/application.properties");
        } catch (IOException e) {
            try {
                connect("127.0.0.1", 9);
            } catch (IOException inner) {
                inner.addSuppressed(e);
                throw new OrderException("order " + id + " could not be placed", inner);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        try {
            placeOrder("ord-2024-000117");
        } catch (OrderException e) {
            e.printStackTrace();
        }
        try {
            Map<String, Integer> stock = new HashMap<>();
            int n = stock.get("sku-42");
        } catch (NullPointerException e) {
            e.printStackTrace();
        }
        try {
            Object o = List.of("a", "b");
            Map<?, ?> m = (Map<?, ?>) o;
        } catch (ClassCastException e) {
            e.printStackTrace();
        }
        ExecutorService pool = Executors.newFixedThreadPool(2);
        Future<Integer> f = pool.submit(() -> Integer.parseInt("12ab"));
        try {
            f.get();
        } catch (ExecutionException e) {
            e.printStackTrace();
        }
        pool.shutdown();
        try {
            recurse(0);
        } catch (StackOverflowError e) {
            StackTraceElement[] s = e.getStackTrace();
            System.err.println("java.lang.StackOverflowError at depth " + s.length + ", top " + s[0]);
        }
        new URI("http://exa mple.com/");
    }

    static int recurse(int n) { return recurse(n + 1) + 1; }
}
EOF
    say javac Orders.java
    (cd "$dir" && javac Orders.java 2>&1)
    say java Orders
    (cd "$dir" && java -cp . Orders 2>&1)
    say java -XshowSettings:properties -version
    java -XshowSettings:properties -version 2>&1
    say 'java -Xlog:class+load -cp . Orders (its first 3000 lines)'
    (cd "$dir" && java -Xlog:class+load -cp . Orders 2>/dev/null | head -n 3000)
}

rec_node_errors() {
    local dir="$scratch/node"
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/thrown.js" <<'EOF'
const fs = require('fs');
function readManifest(path) {
  return JSON.parse(fs.readFileSync(path, 'utf8'));
}
function main() {
  fs.writeFileSync(__dirname + '/bad.json', '{"name": "corpus", "version": }');
  readManifest(__dirname + '/bad.json');
}
main();
EOF
    cat >"$dir/rejection.js" <<'EOF'
const net = require('net');
async function fetchOrder(id) {
  await new Promise((resolve, reject) => {
    const s = net.connect(9, '127.0.0.1', resolve);
    s.on('error', reject);
  });
  return id;
}
fetchOrder('ord-117');
EOF
    cat >"$dir/warnings.js" <<'EOF'
const { EventEmitter } = require('events');
const e = new EventEmitter();
for (let i = 0; i < 12; i++) e.on('data', () => {});
Buffer(8);
process.emitWarning('token cache is nearly full', 'CacheWarning', 'CW001');
const err = new Error('connection reset by peer');
err.code = 'ECONNRESET';
err.cause = new TypeError('Cannot read properties of undefined (reading \'session\')');
console.error(err);
console.error(new AggregateError([new RangeError('bad size'), new SyntaxError('bad json')], 'all failed'));
setTimeout(() => { undefinedFunction(); }, 10);
EOF
    cd "$dir" || return
    say node thrown.js
    node thrown.js 2>&1
    say node rejection.js
    node rejection.js 2>&1
    say node --trace-warnings warnings.js
    node --trace-warnings warnings.js 2>&1
    say node --trace-uncaught --trace-deprecation warnings.js "(in a terminal)"
    tty_run "node --trace-uncaught --trace-deprecation warnings.js"
    say node --help
    node --help 2>&1
    say node -p process.versions
    node -p process.versions 2>&1
    say 'node --v8-options (its first 2000 lines)'
    node --v8-options 2>&1 | head -n 2000
    cd - >/dev/null || return
}

rec_pytest_color() {
    local dir="$scratch/pytest" venv=${VENV:-/tmp/corpus-venv}
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/test_orders.py" <<'EOF'
import json
import pytest


def parse_order(text):
    order = json.loads(text)
    return order["id"], order["items"]


@pytest.fixture
def session_token():
    return "test-session"


def test_parse_ok():
    assert parse_order('{"id": 1, "items": []}') == (1, [])


def test_parse_missing_items():
    assert parse_order('{"id": 2}') == (2, [])


def test_totals():
    prices = {"apple": 0.5, "pear": 0.75}
    assert sum(prices.values()) == 1.3


def test_dicts_differ(session_token):
    got = {"id": 3, "status": "paid", "token_ttl": 900, "tags": ["a", "b"]}
    want = {"id": 3, "status": "shipped", "token_ttl": 900, "tags": ["a", "c"]}
    assert got == want


@pytest.mark.parametrize("n", [1, 2, 3])
def test_even(n):
    assert n % 2 == 0, f"{n} is odd"


def test_raises():
    with pytest.raises(ValueError):
        int("12")


@pytest.mark.skip(reason="needs a database")
def test_db():
    pass


def test_error_in_fixture(tmp_path):
    (tmp_path / "config.json").write_text("{broken")
    json.loads((tmp_path / "config.json").read_text())
EOF
    say python -m pytest -v --color=yes "(in a terminal)"
    (cd "$dir" && tty_run "$venv/bin/python -m pytest -v --color=yes -p no:cacheprovider")
    say python -m pytest --tb=long -rA --color=yes
    (cd "$dir" && "$venv/bin/python" -m pytest --tb=long -rA --color=yes -p no:cacheprovider 2>&1)
}

rec_pip_vvv() {
    local venv="$scratch/pip-venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    say pip install -vvv --no-cache-dir pytest==8.3.4
    "$venv/bin/pip" install -vvv --no-cache-dir pytest==8.3.4 2>&1 | cap
}

rec_apt_debug() {
    say apt-get install -s -o Debug::pkgProblemResolver=1 -o Debug::pkgDepCache::AutoInstall=1 -o Debug::pkgDepCache::Marker=1 nginx postgresql
    apt-get install -s -o Debug::pkgProblemResolver=1 -o Debug::pkgDepCache::AutoInstall=1 \
        -o Debug::pkgDepCache::Marker=1 nginx postgresql 2>&1
    say apt-cache policy openssl libssl3 ca-certificates
    apt-cache policy openssl libssl3 ca-certificates 2>&1
    say apt-cache show openssl
    apt-cache show openssl 2>&1
    say apt-cache depends --recurse --no-suggests git "(its first 1500 lines)"
    apt-cache depends --recurse --no-suggests git 2>&1 | head -n 1500
}

rec_git_trace() {
    local dir="$scratch/git"
    rm -rf "$dir"
    mkdir -p "$dir"
    export GIT_AUTHOR_NAME="Corpus Recorder" GIT_AUTHOR_EMAIL=corpus@example.com
    export GIT_COMMITTER_NAME="Corpus Recorder" GIT_COMMITTER_EMAIL=corpus@example.com
    export GIT_AUTHOR_DATE="2026-01-02T03:04:05Z" GIT_COMMITTER_DATE="2026-01-02T03:04:05Z"
    git init -q -b main "$dir/origin"
    for i in 1 2 3 4 5 6; do
        printf 'line %s\n' "$i" >>"$dir/origin/notes.txt"
        git -C "$dir/origin" add notes.txt
        git -C "$dir/origin" commit -q -m "notes: line $i"
        git -C "$dir/origin" tag "v0.$i.0"
    done
    git -C "$dir/origin" branch feature/login-form
    say GIT_TRACE=1 GIT_TRACE_PACKET=1 git clone origin clone
    (cd "$dir" && GIT_TRACE=1 GIT_TRACE_PACKET=1 git clone --no-local "file://$dir/origin" clone 2>&1)
    printf 'line 7\n' >>"$dir/origin/notes.txt"
    git -C "$dir/origin" commit -q -am "notes: line 7"
    say GIT_TRACE=1 GIT_TRACE_PACKET=1 GIT_TRACE_PERFORMANCE=1 git fetch -v
    (cd "$dir/clone" && GIT_TRACE=1 GIT_TRACE_PACKET=1 GIT_TRACE_PERFORMANCE=1 git fetch -v 2>&1)
    say GIT_TRACE=1 git pull --rebase -v
    (cd "$dir/clone" && GIT_TRACE=1 git pull --rebase -v 2>&1)
    say GIT_CURL_VERBOSE=1 git ls-remote http://127.0.0.1:9/repo.git
    GIT_CURL_VERBOSE=1 GIT_TRACE=1 git ls-remote http://127.0.0.1:9/repo.git 2>&1
    say git log --graph --decorate --color=always --stat
    git -C "$dir/clone" log --graph --decorate --color=always --stat 2>&1
}

rec_openssl() {
    local dir="$scratch/openssl" port=14433
    rm -rf "$dir"
    mkdir -p "$dir"
    # The private keys stay in the scratch folder; only certificates and
    # handshakes are printed.
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/C=DE/O=Corpus Test/CN=localhost" \
        -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
        -subj "/CN=corpus-ec.example.com" -keyout "$dir/ec-key.pem" -out "$dir/ec-cert.pem" 2>/dev/null
    say openssl x509 -text -noout -in cert.pem
    openssl x509 -text -noout -in "$dir/cert.pem" 2>&1
    say openssl x509 -text -noout -fingerprint -sha256 -in ec-cert.pem
    openssl x509 -text -noout -fingerprint -sha256 -in "$dir/ec-cert.pem" 2>&1
    say openssl x509 -in cert.pem "(the certificate itself)"
    cat "$dir/cert.pem"
    openssl s_server -accept "127.0.0.1:$port" -cert "$dir/cert.pem" -key "$dir/key.pem" \
        -www -quiet >/dev/null 2>&1 &
    local server=$!
    sleep 1
    for args in "-msg -tls1_3" "-msg -tls1_2" "-state -tls1_3 -showcerts"; do
        say openssl s_client -connect 127.0.0.1:$port -servername localhost $args
        # Session secrets (master key, resumption PSK, session tickets) are
        # left out.
        printf 'GET / HTTP/1.0\r\n\r\n' |
            openssl s_client -connect "127.0.0.1:$port" -servername localhost \
                -CAfile "$dir/cert.pem" $args 2>&1 |
            drop_secret_lines 'Master-Key|Resumption PSK|PSK identity|Session-ID:|TLS session ticket|^    [0-9a-f]{4} - |Session-ID-ctx'
    done
    kill "$server"
    say openssl s_client -connect 127.0.0.1:9
    openssl s_client -connect 127.0.0.1:9 </dev/null 2>&1
    say openssl ciphers -v
    openssl ciphers -v 2>&1
    say openssl version -a
    openssl version -a 2>&1
}

rec_strace() {
    say strace -f -s 64 sh -c 'ls -l /usr/share/common-licenses; date -u -d @0; echo done | tr a-z A-Z'
    strace -f -s 64 sh -c 'ls -l /usr/share/common-licenses; date -u -d @0; echo done | tr a-z A-Z' 2>&1
    say strace -c -f git --version
    strace -c -f git --version 2>&1
}

rec_rustc_explain() {
    for code in 0004 0061 0106 0119 0133 0252 0277 0282 0308 0369 0382 0384 0404 \
        0412 0425 0432 0433 0499 0502 0505 0506 0507 0515 0596 0597 0599 0603 0614 \
        0658 0716 0728 0746; do
        say rustc --explain "E$code"
        rustc --explain "E$code" 2>&1
    done
}

rec_make_debug() {
    local dir="$scratch/make"
    rm -rf "$dir"
    mkdir -p "$dir/src"
    printf 'int add(int a, int b) { return a + b; }\n' >"$dir/src/add.c"
    printf '#include <stdio.h>\nint add(int, int);\nint main(void) { printf("%%d\\n", add(2, 3)); return 0; }\n' >"$dir/src/main.c"
    cat >"$dir/Makefile" <<'EOF'
CFLAGS ?= -O2 -Wall
OBJS := build/main.o build/add.o

all: build/app

build/app: $(OBJS)
	$(CC) $(CFLAGS) -o $@ $^

build/%.o: src/%.c | build
	$(CC) $(CFLAGS) -c -o $@ $<

build:
	mkdir -p build

clean:
	rm -rf build

.PHONY: all clean
EOF
    say make -d "(its first 6000 lines)"
    (cd "$dir" && make -d 2>&1 | head -n 6000)
    say make -d "(nothing to do; its first 2000 lines)"
    (cd "$dir" && make -d 2>&1 | head -n 2000)
}

rec_gcc_verbose() {
    local dir="$scratch/gcc"
    rm -rf "$dir"
    mkdir -p "$dir"
    printf '#include <stdio.h>\n#include <string.h>\nint main(int argc, char **argv) {\n  char buf[8];\n  strcpy(buf, argv[0]);\n  int unused;\n  printf("%%s %%d\\n", buf);\n  return undefined_value;\n}\n' >"$dir/bad.c"
    printf '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n' >"$dir/hello.c"
    say gcc -v -o hello hello.c
    (cd "$dir" && gcc -v -o hello hello.c 2>&1)
    say gcc -Wall -Wextra -fdiagnostics-color=always bad.c "(in a terminal)"
    (cd "$dir" && tty_run "gcc -Wall -Wextra -fdiagnostics-color=always -c bad.c")
    say gcc -Q --help=optimizers -O2
    gcc -Q --help=optimizers -O2 2>&1
}

rec_cpython_docs() {
    # The reStructuredText sources of CPython 3.11's library docs, as
    # Debian's python3.11-doc package ships them: the modules that speak
    # of passwords, tokens, keys and secrets most.
    local dir="$scratch/cpython-docs"
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && apt-get download python3.11-doc >/dev/null 2>&1 &&
        dpkg-deb -x python3.11-doc_*.deb root)
    local src="$dir/root/usr/share/doc/python3.11/html/_sources/library"
    local pages="smtplib ftplib poplib imaplib getpass secrets hashlib hmac
netrc configparser urllib.request urllib.parse http.client http.cookies
http.cookiejar sqlite3 logging.handlers base64 xmlrpc.client shlex ssl
subprocess tomllib json venv argparse logging"
    for page in $pages; do
        cat "$src/$page.rst.txt"
    done | drop_secret_lines "kadidd!ehopper"
}

rec_cargo_test_failures() {
    # This workspace's own test and build output with failures in it:
    # failing tests in modules named after credentials (`auth::tests`,
    # `token::Lexer`, `password::policy`), panics with and without
    # backtraces, a type error, then the real pass list of the redaction
    # tests (`redact::tests::rule_password_assignment ... ok`). The scratch
    # test files are removed afterwards.
    local root
    root=$(cd "$here/../../.." && pwd)
    local fail="$root/core/tests/zz_corpus_failures.rs"
    local broken="$root/core/tests/zz_corpus_type_error.rs"
    trap 'rm -f "$fail" "$broken"' RETURN
    cat >"$fail" <<'RS'
mod auth {
    pub mod tests {
        #[derive(Debug, PartialEq)]
        pub struct Session { pub user: &'static str, pub token: Option<&'static str>, pub expired: bool }
        #[test]
        fn login_fails_with_an_expired_session() {
            let got = Session { user: "ana", token: None, expired: true };
            assert_eq!(got, Session { user: "ana", token: None, expired: false });
        }
        #[test]
        fn x() {}
    }
}
mod token {
    pub struct Lexer<'a> { pub rest: &'a str }
    impl Lexer<'_> {
        pub fn next_token(&mut self) -> Option<char> {
            let c = self.rest.chars().next().expect("token::Lexer::next_token: input ended");
            self.rest = &self.rest[c.len_utf8()..];
            Some(c)
        }
    }
    #[test]
    fn lexer_reads_past_the_end() {
        let mut lexer = Lexer { rest: "a" };
        lexer.next_token();
        lexer.next_token();
    }
}
mod credentials {
    pub mod provider {
        pub fn chain() -> Result<(), String> {
            Err("credentials::provider::chain: no provider in the chain gave credentials".into())
        }
        #[test]
        fn the_chain_finds_a_provider() {
            chain().unwrap();
        }
    }
}
mod password {
    pub mod policy {
        pub const MIN_LEN: usize = 12;
        #[test]
        fn password_policy_min_len_is_16() {
            assert!(MIN_LEN >= 16, "password::policy::MIN_LEN = {MIN_LEN}");
        }
    }
}
#[test]
fn secret_in_a_thread() {
    let worker = std::thread::Builder::new().name("auth-worker".into());
    worker.spawn(|| panic!("secret store sealed")).unwrap().join().unwrap();
}
RS
    cat >"$broken" <<'RS'
struct Credentials { user: String, password_hash: Vec<u8> }
fn check(c: &Credentials, token: &str) -> bool {
    let secret: String = c.password_hash;
    token.len() == secret.len() && c.user.is_empty()
}
RS
    cd "$root" || return
    say cargo test -p spillguard-core --test zz_corpus_failures
    cargo test -p spillguard-core --test zz_corpus_failures --color=always 2>&1
    say RUST_BACKTRACE=1 cargo test -p spillguard-core --test zz_corpus_failures token
    RUST_BACKTRACE=1 cargo test -p spillguard-core --test zz_corpus_failures token 2>&1
    say RUST_BACKTRACE=full cargo test -p spillguard-core --test zz_corpus_failures secret "(its first 200 lines)"
    RUST_BACKTRACE=full cargo test -p spillguard-core --test zz_corpus_failures secret 2>&1 | head -n 200
    say cargo build -p spillguard-core --tests "(a type error)"
    cargo build -p spillguard-core --tests 2>&1
    rm -f "$broken"
    say cargo test -p spillguard-core --lib redact
    cargo test -p spillguard-core --lib redact 2>&1
    say cargo test -p spillguard-core --lib -- --list
    cargo test -p spillguard-core --lib -- --list 2>&1
}

rec_cxx_errors() {
    local dir="$scratch/cxx"
    rm -rf "$dir"
    mkdir -p "$dir"
    cat >"$dir/auth.cpp" <<'CPP'
#include <map>
#include <memory>
#include <string>
#include <vector>
namespace auth {
struct Token { std::string value; int expires_in; };
class Credentials {
public:
  explicit Credentials(std::string user) : user_(std::move(user)) {}
  const std::string& password() const { return password_; }
private:
  std::string user_;
  std::string password_;
};
template <typename T> struct Store { std::map<std::string, T> secrets; };
}  // namespace auth
int main() {
  auth::Credentials creds = "ana";
  auth::Store<auth::Token> store;
  store.secrets["api"] = 42;
  std::unique_ptr<auth::Token> token = std::make_unique<auth::Token>();
  std::vector<auth::Token> tokens{token};
  int secret_key = creds.password();
  return creds.password_.size() + secret_key;
}
CPP
    say g++ -std=c++17 -c auth.cpp
    (cd "$dir" && g++ -std=c++17 -c auth.cpp 2>&1)
    say g++ -std=c++17 -fdiagnostics-color=always -c auth.cpp "(in a terminal)"
    (cd "$dir" && tty_run "g++ -std=c++17 -fdiagnostics-color=always -c auth.cpp")
}

rec_git_log_public() {
    # `git log --stat` of a public repository (ripgrep; RIPGREP_REPO may
    # name a local clone).
    local repo=${RIPGREP_REPO:-$scratch/ripgrep}
    [ -d "$repo" ] || git clone -q --bare https://github.com/BurntSushi/ripgrep "$repo"
    say git log --stat -n 400 "(ripgrep, up to 3fce3b5)"
    git --git-dir="$repo" log --stat -n 400 3fce3b5b
}

all="kubectl_help kubectl_dry_run gcloud_help docker_help aws_help aws_debug
curl_verbose ssh_verbose terraform_plan go_errors java_exceptions node_errors
pytest_color pip_vvv apt_debug git_trace openssl strace rustc_explain
make_debug gcc_verbose cpython_docs cargo_test_failures cxx_errors
git_log_public"
for name in ${*:-$all}; do
    out="$here/${name//_/-}.txt"
    "rec_$name" | cap >"$out"
    printf '%-24s %8d bytes\n' "${name//_/-}.txt" "$(wc -c <"$out")" >&2
done
