#!/usr/bin/perl
# The operations kit against Debian's Prometheus (make test-ops): promtool
# accepts /metrics from two engines, the alert rules and their unit tests,
# every metric the rules and the dashboard use is in /metrics, and a real
# Prometheus on loopback scrapes ngx_llm, evaluates the rules and answers
# a series back through its HTTP API.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/../lib";
use NgxLlm::Harness;
use Cwd qw(abs_path);
use JSON::PP;
use POSIX qw(WNOHANG);
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run it with make test-ops');
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run it with make test-ops');
for my $tool (qw(promtool prometheus)) {
    system("command -v $tool >/dev/null 2>&1") == 0
        or BAIL_OUT("$tool not found: make test-ops installs Debian's "
                    . "prometheus package (tools/deps.sh --ops)");
}
my $repo = abs_path("$FindBin::Bin/../..");
my $rules = "$repo/conf.example/prometheus/ngx_llm.rules.yml";
my $rules_test = "$repo/conf.example/prometheus/ngx_llm.rules.test.yml";
my $dashboard = "$repo/conf.example/grafana/ngx_llm.dashboard.json";
my $stories = "$ENV{TEST_NGINX_FIXTURES}/models/tiny260K-q8_0.gguf";

my $port = nginx_setup('ops', <<"EOF", $ENV{TEST_NGINX_PORT} ? (port => $ENV{TEST_NGINX_PORT}) : ());
    llm_engine main {
        model \$MODEL;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 64m;
    }
    llm_engine tiny {
        model $stories;
        served_model_name stories;
        kv_cache_memory 8m;
        threads 1;
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
        location = /tiny/healthz { llm_health tiny; }
        location = /metrics { llm_metrics; }
    }
EOF
my $dir = NgxLlm::Harness::prefix();

is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(60), 'engine main ready');
my $deadline = time + 30;
sleep 0.1 while time < $deadline && (http_get('/tiny/healthz'))[0] != 200;
my ($st) = http_post('/v1/completions', '{"model":"smollm2","prompt":"Hi","max_tokens":4}', 60);
is($st, 200, 'a completion, so the histograms have counts');

# --- promtool ------------------------------------------------------------------

my ($mst, $scrape) = http_get('/metrics', 5);
is($mst, 200, '/metrics answers');
like($scrape, qr/engine="tiny"/, 'both engines in the scrape');
open my $f, '>', "$dir/metrics.txt" or die $!;
print $f $scrape;
close $f;

my $out = `promtool check metrics < $dir/metrics.txt 2>&1`;
my $rc = $? >> 8;
# vLLM's names are vLLM's: ':' in them, and a histogram named *_total
my @complaints = grep {
    !/^vllm:\w+ metric names should not contain ':'$/
    && !/^vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix$/
} split /\n/, $out;
ok($rc == 0 || ($rc == 3 && !@complaints), "promtool check metrics: rc $rc, only the lints on vLLM's names")
    or diag($out);
is_deeply(\@complaints, [], 'no other complaint');

is(system("promtool check rules $rules >$dir/check-rules.log 2>&1"), 0, 'promtool check rules')
    or diag(`cat $dir/check-rules.log`);
is(system("promtool test rules $rules_test >$dir/test-rules.log 2>&1"), 0,
   'promtool test rules: one unit test per alert') or diag(`cat $dir/test-rules.log`);
my $alerts = () = `cat $rules` =~ /^\s*- alert: /mg;
my $tested = () = `cat $rules_test` =~ /^\s*alertname: /mg;
cmp_ok($tested, '>=', 2 * $alerts, "$alerts alerts, $tested evaluations (each fires and stays quiet)");

is(system("python3 $repo/tools/ops_check.py $dir/metrics.txt $rules $dashboard >$dir/ops-check.log 2>&1"), 0,
   'every metric the rules and the dashboard use is in /metrics') or diag(`cat $dir/ops-check.log`);

# --- a live Prometheus ------------------------------------------------------------

my $pport = $port + 1;
mkdir "$dir/prom";
open $f, '>', "$dir/prom/prometheus.yml" or die $!;
print $f <<"EOF";
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $rules
scrape_configs:
  - job_name: ngx_llm
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
close $f;

my $prom;
END {
    # a failed check must not leave servers behind
    if ($prom) { kill 'TERM', $prom; waitpid($prom, 0); }
    nginx_cmd('-s', 'quit') if NgxLlm::Harness::master_pid();
}
$prom = fork // die "fork: $!";
if ($prom == 0) {
    open STDOUT, '>', "$dir/prom/prometheus.log" or die $!;
    open STDERR, '>&', \*STDOUT or die $!;
    exec 'prometheus', "--config.file=$dir/prom/prometheus.yml",
         "--storage.tsdb.path=$dir/prom/data",
         "--web.listen-address=127.0.0.1:$pport";
    die "exec prometheus: $!";
}

sub api {
    my ($path, $query) = @_;
    my $args = defined $query ? "--data-urlencode 'query=$query'" : '';
    my $body = `curl -s --max-time 5 $args 'http://127.0.0.1:$pport$path' 2>/dev/null`;
    return eval { decode_json($body) };
}

# the query's result once it has every engine, or the last answer
sub read_back {
    my ($query, $want, $secs) = @_;
    my ($r, $until) = (undef, time + $secs);
    while (time < $until) {
        $r = api('/api/v1/query', $query);
        last if $r && $r->{status} eq 'success' && @{$r->{data}{result}} >= $want;
        last if waitpid($prom, WNOHANG) == $prom;
        sleep 0.5;
    }
    return $r;
}

my $r = read_back('vllm:num_requests_running', 2, 60);
my %running = map { $_->{metric}{engine} => $_->{value}[1] } @{$r->{data}{result} || []};
is_deeply(\%running, { main => '0', tiny => '0' },
          'Prometheus scraped vllm:num_requests_running of both engines')
    or diag(explain($r), `tail -20 $dir/prom/prometheus.log`);

$r = read_back('vllm:cache_config_info{engine="main"}', 1, 10);
my ($info) = @{$r->{data}{result} || []};
is($info && $info->{metric}{block_size}, '16', 'cache_config_info read back: block_size 16');
is($info && $info->{metric}{job}, 'ngx_llm', 'with the scrape job label');

$r = read_back('vllm:generation_tokens_total{engine="main"} > 4', 1, 10);
is(scalar @{$r->{data}{result} || []}, 1, 'the completion\'s tokens counted, past the warm-up\'s 4');

# every rule evaluated without an error
my ($health, $until) = ({}, time + 30);
while (time < $until) {
    my $rr = api('/api/v1/rules');
    $health = { map { $_->{name} => $_->{health} }
                map { @{$_->{rules}} } @{$rr->{data}{groups} || []} };
    last if keys %$health == $alerts && !grep { $_ ne 'ok' } values %$health;
    sleep 0.5;
}
is(scalar(grep { $_ eq 'ok' } values %$health), $alerts, "all $alerts rules evaluate ok")
    or diag(explain($health));
my $firing = api('/api/v1/alerts');
is_deeply([map { $_->{labels}{alertname} } @{$firing->{data}{alerts} || []}], [],
          'a healthy ngx_llm fires no alert');

done_testing();
