#!/usr/bin/perl
# The model's integrity (docs/operations.md): model_sha256, or a
# "<model>.sha256" file beside the model, is checked once by the master at
# configuration time; a mismatch is an [emerg] naming both hashes, and
# nginx -t fails with it; /v1/models and /metrics show the hash; a reload
# of the same file reuses the master's cached hash (no second "sha256 of
# model" line), and an engine restart after a crash never hashes. Reloads
# and a SIGKILL mid-test, so a plain script (docs/testing.md).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use Digest::SHA;
use File::Copy qw(copy);
use File::Path qw(make_path);
use Test::More;
use Time::HiRes qw(sleep time);

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_FIXTURES}
    or BAIL_OUT('TEST_NGINX_FIXTURES not set: run the suites with make t-nginx');

my $model = $ENV{TEST_NGINX_MODEL};
my $t0 = time;
my $sha = Digest::SHA->new(256)->addfile($model, 'b')->hexdigest;
diag(sprintf 'Digest::SHA of the model: %.2f s', time - $t0);
my $wrong = '0' x 64;
my %port = $ENV{TEST_NGINX_SERVER_PORT}
           ? (port => $ENV{TEST_NGINX_SERVER_PORT}) : ();

sub conf {
    my ($engine_params, %opt) = @_;
    return nginx_setup('integrity', <<"EOF", keep => $opt{keep}, %port);
    llm_engine main {
        model $opt{model};
        kv_cache_memory 64m;
        max_model_len 1024;
        $engine_params
    }
    server {
        listen 127.0.0.1:\$PORT;
        location /v1/ { llm_api main; }
        location = /healthz { llm_health main; }
        location = /metrics { llm_metrics; }
    }
EOF
}

# nginx -t: its exit status and what it printed
sub nginx_t {
    my $out = `$ENV{TEST_NGINX_BINARY} -p ${\NgxLlm::Harness::prefix()}/ -c conf/nginx.conf -t 2>&1`;
    return ($? >> 8, $out);
}

sub hash_lines {
    return scalar NgxLlm::Harness::log_lines(qr/sha256 of model/);
}

# --- nginx -t: right, wrong, malformed ----------------------------------------

conf("model_sha256 $sha;", model => $model);
my ($rc, $out) = nginx_t();
is($rc, 0, 'nginx -t: the right model_sha256 passes') or diag($out);
my ($ms) = $out =~ /sha256 of model "[^"]+" \(\d+ bytes\) computed in (\d+) ms/;
ok(defined $ms, 'nginx -t hashed the model once');
diag("the master hashed the model in $ms ms") if defined $ms;

conf("model_sha256 \U$sha\E;", model => $model);
($rc, $out) = nginx_t();
is($rc, 0, 'nginx -t: upper-case hex passes too') or diag($out);

conf("model_sha256 $wrong;", model => $model);
($rc, $out) = nginx_t();
isnt($rc, 0, 'nginx -t: a wrong model_sha256 fails');
like($out, qr/\[emerg\].*model "\Q$model\E" does not match its sha256: expected $wrong, the file has $sha/,
     'the [emerg] names the model, the expected and the actual hash');

conf('model_sha256 abc;', model => $model);
($rc, $out) = nginx_t();
isnt($rc, 0, 'nginx -t: a malformed model_sha256 fails');
like($out, qr/\[emerg\] \d+#\d+: invalid model_sha256 "abc": 64 hex digits expected/,
     'the [emerg] says what a sha256 is');

# --- <model>.sha256 beside the model --------------------------------------------

my $dir = NgxLlm::Harness::prefix() . '/models';
make_path($dir);
my $tiny = "$dir/tiny.gguf";
copy("$ENV{TEST_NGINX_FIXTURES}/models/tiny260K-q8_0.gguf", $tiny) or die $!;
my $tiny_sha = Digest::SHA->new(256)->addfile($tiny, 'b')->hexdigest;

sub side_file {
    open my $f, '>', "$tiny.sha256" or die $!;
    print $f @_;
    close $f;
}

side_file("$tiny_sha  tiny.gguf\n");
conf('', model => $tiny, keep => 1);
($rc, $out) = nginx_t();
is($rc, 0, 'a right <model>.sha256 (sha256sum format) passes') or diag($out);
like($out, qr/sha256 of model "\Q$tiny\E"/, 'it was checked');

side_file("$wrong  tiny.gguf\n");
($rc, $out) = nginx_t();
isnt($rc, 0, 'a wrong <model>.sha256 fails');
like($out, qr/does not match its sha256: expected $wrong, the file has $tiny_sha/,
     'naming both hashes');

side_file("not a hash\n");
($rc, $out) = nginx_t();
isnt($rc, 0, 'a malformed <model>.sha256 fails');
like($out, qr/\[emerg\] \d+#\d+: "\Q$tiny\E\.sha256" does not start with a sha256/,
     'saying which file');

unlink "$tiny.sha256";
($rc, $out) = nginx_t();
is($rc, 0, 'without model_sha256 nor a .sha256 file nothing is checked');
unlike($out, qr/sha256 of model/, 'and nothing is hashed');

# --- served: the hash in /v1/models and /metrics; reload and restart -------------

# at start nginx logs to stderr until it opens error_log
conf("model_sha256 $sha;", model => $model);
$out = `$ENV{TEST_NGINX_BINARY} -p ${\NgxLlm::Harness::prefix()}/ -c conf/nginx.conf 2>&1`;
is($? >> 8, 0, 'nginx starts with model_sha256') or diag($out);
is(scalar(() = $out =~ /sha256 of model/g), 1,
   'the master hashed the model once at start');
my $engine = wait_healthy(60);
ok($engine, 'the engine is ready');

my ($st, $body) = http_get('/v1/models');
like($body, qr/"sha256":"$sha"/, '/v1/models shows the sha256');
($st, $body) = http_get('/metrics');
like($body, qr/^ngx_llm_model_info\{model_name="[^"]+",engine="[^"]+",sha256="$sha"\} 1$/m,
     '/metrics has ngx_llm_model_info with the sha256');

# a reload of the same file: the cached hash, same engine
my $workers = () = NgxLlm::Harness::log_lines(qr/start worker process/);
$t0 = time;
kill 'HUP', master_pid();
my $deadline = time + 10;
sleep 0.01 while time < $deadline
                 && NgxLlm::Harness::log_lines(qr/start worker process/)
                    < $workers + 2;
my $reload = time - $t0;
sleep 1;
is(hash_lines(), 0, 'a reload with the same file did not hash again');
diag(sprintf 'reload (cache hit): new workers %.3f s after SIGHUP', $reload);
is(wait_healthy(10), $engine, 'the same engine serves after the reload');

# an engine restart after a crash: the master is not involved, nothing hashes
kill 'KILL', $engine;
$t0 = time;
my $again = wait_healthy(20, $engine);
ok($again, 'a new engine is ready after SIGKILL');
diag(sprintf 'engine back in %.2f s', time - $t0);
is(hash_lines(), 0, 'the restart did not hash');

# a reload with a wrong hash is refused; the old configuration keeps serving
conf("model_sha256 $wrong;", model => $model, keep => 1);
kill 'HUP', master_pid();
$deadline = time + 10;
sleep 0.05 while time < $deadline
                 && !NgxLlm::Harness::log_lines(qr/does not match its sha256/);
ok(scalar NgxLlm::Harness::log_lines(qr/\[emerg\].*does not match its sha256: expected $wrong, the file has $sha/),
   'a reload with a wrong hash logs the [emerg]');
($st, $body) = http_get('/v1/models');
is($st, 200, 'the old configuration still serves');
like($body, qr/"sha256":"$sha"/, 'with its checked hash');

# not nginx -s quit: it would read the refused configuration
my $master = master_pid();
kill 'QUIT', $master;
ok(wait_gone(20, $master, $again), 'nginx and its engine are gone');

done_testing();
