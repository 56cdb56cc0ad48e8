#!/usr/bin/perl
# The Debian package (make test-package; needs root, not part of make
# test): build/deb/libnginx-mod-http-llm_*.deb installs with dpkg, links
# its mod-http-llm.conf into /etc/nginx/modules-enabled as Debian's module
# packages do, leaves the system's nginx.conf valid, and Debian's nginx
# with only `include /etc/nginx/modules-enabled/*.conf` (no load_module of
# ours, no `binary`) loads the packaged module, which starts the packaged
# engine (/usr/lib/nginx/ngx_llm_engine) and answers /v1/models, a chat
# completion and the playground page. Then the container's configuration
# (conf.example/docker/nginx.conf) runs on the same package, with the
# Dockerfile's HEALTHCHECK command and the probes of conf.example/
# kubernetes/deployment.yaml against it. Then dpkg --purge, and the files
# dpkg and nginx touch are as they were before.
use strict;
use warnings;

use Cwd qw(abs_path);
use File::Path qw(make_path remove_tree);
use FindBin;
use HTTP::Tiny;
use JSON::PP;
use Test::More;
use Time::HiRes qw(sleep time);

my $pkg = 'libnginx-mod-http-llm';
my $model = $ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run it with make test-package');
my $build = abs_path($ENV{TEST_NGINX_BUILD} || 'build');
my ($deb) = glob("$build/deb/${pkg}_*.deb");
$deb or BAIL_OUT("no $build/deb/${pkg}_*.deb: run it with make test-package");
$> == 0 or BAIL_OUT('dpkg -i needs root');
my $st = `dpkg-query -W -f='\${db:Status-Abbrev}' $pkg 2>/dev/null`;
$st =~ /^.[ic]/
    and BAIL_OUT("$pkg is installed already: this test installs and purges "
                 . "it, so it leaves an installed copy alone");

my $port = $ENV{TEST_NGINX_PORT} || 19320;
my $dir = "$build/t/package";
my $nginx = '/usr/sbin/nginx';
my $engine = '/usr/lib/nginx/ngx_llm_engine';
my $link = '/etc/nginx/modules-enabled/50-mod-http-llm.conf';
my $http = HTTP::Tiny->new(timeout => 120);
my $base = "http://127.0.0.1:$port";
my $installed = 0;

# what dpkg and nginx may touch: paths, types, link targets, file contents
# (not directory times: adding and removing a link changes those)
my @watched = qw(/etc/nginx /usr/lib/nginx /usr/share/nginx/modules-available
                 /usr/share/ngx_llm /usr/share/doc/libnginx-mod-http-llm);
sub snapshot {
    my @e = grep { -e $_ || -l $_ } @watched;
    return '' unless @e;
    return scalar `find @e -printf '%p %y %l\\n' | sort; find @e -type f -exec md5sum {} + | sort`;
}

# dpkg with a few retries while another apt or dpkg holds its lock
sub dpkg {
    my (@args) = @_;
    my $out;
    for (1 .. 30) {
        $out = `dpkg @args 2>&1`;
        return (0, $out) if $? == 0;
        last unless $out =~ /lock/i;
        sleep 2;
    }
    return ($? >> 8 || 1, $out);
}

sub master {
    open my $f, '<', "$dir/nginx.pid" or return undef;
    my $pid = <$f>;
    chomp $pid if defined $pid;
    return $pid;
}

# a zombie is gone
sub alive {
    my ($pid) = @_;
    open my $f, '<', "/proc/$pid/stat" or return 0;
    my ($state) = (<$f> // '') =~ /\) (\S)/;
    return defined $state && $state ne 'Z';
}

sub stop_nginx {
    my $pid = master() or return;
    kill 'QUIT', $pid;
    my $deadline = time + 20;
    sleep 0.1 while alive($pid) && time < $deadline;
    kill 'KILL', $pid if alive($pid);
    unlink "$dir/nginx.pid";
}

END {
    stop_nginx();
    dpkg('--purge', $pkg) if $installed;
}

my $before = snapshot();
my $system_t = `$nginx -t 2>&1`;
my $system_ok = $? == 0;

# --- install -------------------------------------------------------------------

my ($rc, $out) = dpkg('-i', $deb);
$installed = 1;
is($rc, 0, "dpkg -i $deb") or diag $out;
ok(-f '/usr/lib/nginx/modules/ngx_http_llm_module.so', 'module in /usr/lib/nginx/modules');
ok(-x $engine, "engine at $engine");
is(readlink($link), '/usr/share/nginx/modules-available/mod-http-llm.conf',
   "$link links mod-http-llm.conf (dh_nginx's postinst)");
my $load = do { local (@ARGV, $/) = ($link); <> } // '';
is($load, "load_module modules/ngx_http_llm_module.so;\n", 'mod-http-llm.conf loads the module');
ok(-f '/usr/share/ngx_llm/playground/index.html', 'playground page installed');

# the system's configuration, which includes modules-enabled, still passes
SKIP: {
    skip "the system's nginx.conf failed nginx -t before the install", 1 unless $system_ok;
    my $t = `$nginx -t 2>&1`;
    ok($? == 0, "the system's nginx.conf passes nginx -t with the module enabled") or diag $t;
}

# --- Debian's nginx serves with the packaged module --------------------------------

remove_tree($dir);
make_path($dir);
open my $f, '>', "$dir/nginx.conf" or die $!;
print $f <<"EOF";
# the system's prefix (/usr/share/nginx, where modules/ is Debian's link
# to /usr/lib/nginx/modules); the module comes from modules-enabled only
include /etc/nginx/modules-enabled/*.conf;
worker_processes 2;
error_log $dir/error.log info;
pid $dir/nginx.pid;
events { worker_connections 256; }
http {
    access_log $dir/access.log;
    client_body_temp_path $dir/body;
    llm_engine main {
        model $model;
        served_model_name smollm2;
        max_model_len 2048;
        kv_cache_memory 64m;
    }
    server {
        listen 127.0.0.1:$port;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
        location = /playground {
            alias /usr/share/ngx_llm/playground/index.html;
            default_type text/html;
        }
    }
}
EOF
close $f;

$out = `$nginx -e $dir/error.log -c $dir/nginx.conf 2>&1`;
is($?, 0, 'Debian nginx starts with the conf') or diag $out;

my $deadline = time + 90;
my $health;
while (time < $deadline) {
    $health = $http->get("$base/healthz");
    last if $health->{status} == 200;
    sleep 0.5;
}
is($health->{status}, 200, 'engine ready (/healthz 200)')
    or diag $health->{content}, `tail -20 $dir/error.log`;

my $r = $http->get("$base/v1/models");
is($r->{status}, 200, 'GET /v1/models');
my $models = eval { decode_json($r->{content}) } // {};
my $m = $models->{data}[0] // {};
is($m->{id}, 'smollm2', 'the served model name');
is($m->{meta}{architecture}, 'llama', "the model's architecture");
my $pid = $m->{meta}{engine_pid} // 0;
is(readlink("/proc/$pid/exe"), $engine, "engine $pid runs the packaged $engine");

$r = $http->post("$base/v1/chat/completions", {
    headers => { 'Content-Type' => 'application/json' },
    content => encode_json({ model => 'smollm2', max_tokens => 16,
                             temperature => 0,
                             messages => [{ role => 'user',
                                            content => 'Name three colors.' }] }),
});
is($r->{status}, 200, 'POST /v1/chat/completions') or diag $r->{content};
my $c = eval { decode_json($r->{content}) } // {};
my $text = $c->{choices}[0]{message}{content} // '';
ok(length $text, 'the reply has content') and note "reply: $text";
cmp_ok($c->{usage}{completion_tokens} // 0, '>', 0, 'usage counts its tokens');

$r = $http->get("$base/playground");
is($r->{status}, 200, 'GET /playground');
like($r->{headers}{'content-type'} // '', qr{^text/html}, 'served as text/html');
like($r->{content}, qr{<title>ngx_llm playground</title>}, 'the packaged page');

stop_nginx();
my $gone = time + 10;
sleep 0.1 while alive($pid) && time < $gone;
ok(!alive($pid), 'the engine follows nginx out');

# --- the container's nginx.conf, HEALTHCHECK and probes, on the package -------------

my $repo = abs_path("$FindBin::Bin/../..");
my $docker_conf = do { local (@ARGV, $/) = ("$repo/conf.example/docker/nginx.conf"); <> };
for ([ '/models/model.gguf', $model ], [ 'listen  8080;', "listen  127.0.0.1:$port;" ],
     [ '/run/nginx.pid', "$dir/nginx.pid" ]) {
    my ($from, $to) = @$_;
    ok($docker_conf =~ s/\Q$from\E/$to/g, "docker/nginx.conf has $from");
}
open $f, '>', "$dir/docker.conf" or die $!;
print $f $docker_conf;
close $f;

my $dockerfile = do { local (@ARGV, $/) = ("$repo/conf.example/docker/Dockerfile"); <> };
my ($check) = $dockerfile =~ /^HEALTHCHECK\b.*?\\\n\s+CMD (.+)$/m;
ok($check && $check =~ s{127\.0\.0\.1:8080/}{127.0.0.1:$port/}, 'the HEALTHCHECK command')
    or diag $check;
my $probes = `/usr/bin/python3 -c '
import json, sys, yaml
d = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d["kind"] == "Deployment")
c = d["spec"]["template"]["spec"]["containers"][0]
print(json.dumps({k: c[k]["httpGet"]["path"] for k in ("startupProbe", "readinessProbe", "livenessProbe")}))
' $repo/conf.example/kubernetes/deployment.yaml`;
$probes = eval { decode_json($probes) } // {};
is(scalar keys %$probes, 3, "deployment.yaml's three probes");

# daemon off, as in the container: in the background here
system("$nginx -e $dir/error.log -c $dir/docker.conf > $dir/docker.out 2>&1 &");
$deadline = time + 90;
my $checked;
while (time < $deadline) {
    $checked = system('sh', '-c', "($check) >/dev/null 2>&1") == 0;
    last if $checked;
    sleep 0.5;
}
ok($checked, "the HEALTHCHECK passes: $check")
    or diag `tail -20 $dir/docker.out`;
for my $probe (sort keys %$probes) {
    is($http->get("$base$probes->{$probe}")->{status}, 200,
       "$probe $probes->{$probe} answers 200");
}
$r = $http->get("$base/metrics");
like($r->{content}, qr/^vllm:num_requests_waiting\{/m,
     "/metrics has hpa.yaml's vllm:num_requests_waiting");
is($http->get("$base/playground")->{status}, 200, 'the playground in the container conf');
$r = $http->post("$base/v1/chat/completions", {
    headers => { 'Content-Type' => 'application/json' },
    content => '{"model":"smollm2","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}',
});
is($r->{status}, 200, 'a chat completion with the container conf') or diag $r->{content};
$pid = eval { decode_json($http->get("$base/v1/models")->{content})->{data}[0]{meta}{engine_pid} } // 0;
my $uid = (stat "/proc/$pid")[4];
is($uid, scalar getpwnam('www-data'), "the engine runs as the conf's user www-data");

# SIGQUIT, the image's STOPSIGNAL: nginx and its engine go
my $master = master();
kill 'QUIT', $master if $master;
$gone = time + 20;
sleep 0.1 while (alive($master) || alive($pid)) && time < $gone;
ok(!alive($master) && !alive($pid), 'SIGQUIT stops nginx and the engine');
unlink "$dir/nginx.pid";

# --- purge ---------------------------------------------------------------------------

($rc, $out) = dpkg('--purge', $pkg);
is($rc, 0, "dpkg --purge $pkg") or diag $out;
$installed = 0 if $rc == 0;
ok(!-e $link && !-l $link && !-l "$link.removed", 'no modules-enabled link left');
my $after = snapshot();
is($after, $before, 'the watched files are as they were before the install');

done_testing();
