#!/usr/bin/perl
# Fidelity of the files our quantizer makes (issue 25 item 4): the default
# model requantized into llama.cpp's mixes (Q4_K_M, Q2_K, Q5_K_M, IQ4_XS)
# by `ngx_llm_engine quantize`, served through nginx, against transformers
# run by tools/oracle.py on those very files (t/data/golden-quant/MIX.json,
# docs/oracle.md). No Python here: the test
#
#   1. remakes each file and checks it is byte for byte the one the golden
#      was made from (size and sha256): a quantizer that writes other
#      bytes fails here until the goldens are made again;
#   2. serves the four files from one nginx and, per golden prompt (as
#      token ids), follows the reference's 32 greedy ids by teacher
#      forcing through /v1/completions (logprobs 5): a request continues
#      greedily from the prompt plus the reference ids so far; where the
#      engine's pick leaves the reference, the next request restarts on
#      the reference's id. At every step, with the golden's tolerance t
#      (docs/numerics.md, rule 2):
#      - the engine's pick is the reference's id before the golden's
#        first_small_margin_step (free-running greedy agrees up to there)
#        and wherever the reference's margin is at least 2t;
#      - where they agree, the engine's top-1 minus top-2 logprob (a
#        difference of logits) is within 2t of the reference's margin
#        (each logit within t);
#      - where they differ, the reference's id is within 2t of the
#        engine's pick (or everything in the engine's top 5 is);
#      - at the last prompt position, every id of the engine's top 5 that
#        is in the reference's top 20 has its logit, relative to the
#        reference's top id, within 2t of the reference's.
#   The measured maxima are printed (note lines).
#
# The engine names tokens by their text in logprobs; the reference's ids
# get theirs from /detokenize (the same tokenizer), one id at a time.
use strict;
use warnings;

use Digest::SHA;
use FindBin;
use lib "$FindBin::Bin/lib";
use NgxLlm::Harness;
use JSON::PP;
use List::Util qw(max);
use Test::More;

$ENV{TEST_NGINX_LOAD_MODULES}
    or BAIL_OUT('TEST_NGINX_LOAD_MODULES not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_MODEL}
    or BAIL_OUT('TEST_NGINX_MODEL not set: run the suites with make t-nginx');
$ENV{TEST_NGINX_ENGINE}
    or BAIL_OUT('TEST_NGINX_ENGINE not set: run the suites with make t-nginx');

my @mixes = qw(Q4_K_M Q2_K Q5_K_M IQ4_XS);
my $build = $ENV{TEST_NGINX_BUILD} || 'build';
my $dir = "$build/t/fidelity";
system('mkdir', '-p', $dir) == 0 or die;
my $json = JSON::PP->new->canonical;

sub slurp {
    open my $f, '<', $_[0] or die "$_[0]: $!";
    local $/;
    return <$f>;
}

# --- 1. the files, as the goldens were made from them ------------------------

my (%golden, %file);
for my $mix (@mixes) {
    my $g = $golden{$mix} = decode_json(slurp("$FindBin::Bin/data/golden-quant/$mix.json"));
    my $out = $file{$mix} = "$dir/smollm2-$mix.gguf";
    is(system("$ENV{TEST_NGINX_ENGINE} quantize $ENV{TEST_NGINX_MODEL} $out "
              . "$mix > $dir/quantize-$mix.log 2>&1"), 0, "$mix: quantized");
    my $sha = Digest::SHA->new(256)->addfile($out, 'b')->hexdigest;
    ok(-s $out == $g->{model}{bytes} && $sha eq $g->{model}{sha256},
       "$mix: the file the golden was made from ($sha, "
       . "${\(-s $out)} bytes; golden $g->{model}{sha256}, "
       . "$g->{model}{bytes} bytes: if the quantizer changed on purpose, "
       . "remake it with tools/oracle.py --only quant)")
        or BAIL_OUT("$mix: not the golden's file");
}

# --- 2. through nginx ---------------------------------------------------------

my $engines = join '', map { <<"EOF" } @mixes;
    llm_engine \L$_\E {
        model $file{$_};
        served_model_name smollm2;
        max_model_len 512;
        kv_cache_memory 16m;
        max_num_seqs 4;
        threads 1;
    }
EOF
my $locations = join '', map { "        location /\L$_\E/ { llm_api \L$_\E; }\n" } @mixes;
nginx_setup('fidelity-nginx', <<"EOF", $ENV{TEST_NGINX_FIDELITY_PORT} ? (port => $ENV{TEST_NGINX_FIDELITY_PORT}) : ());
$engines
    server {
        listen 127.0.0.1:\$PORT;
$locations
        location = /healthz { llm_health q4_k_m; }
    }
EOF
is(nginx_cmd(), 0, 'nginx starts');
ok(wait_healthy(120), 'the engines are ready');

my %piece;
sub piece {
    my ($loc, $id) = @_;
    return $piece{$id} if defined $piece{$id};
    my ($st, $body) = http_post("/$loc/detokenize", encode_json({tokens => [$id]}), 30);
    die "detokenize $id: $st $body" unless $st == 200;
    return $piece{$id} = decode_json($body)->{prompt};
}

# one greedy request from these ids: [[piece, {piece => logprob}], ...]
sub greedy {
    my ($loc, $ids, $n) = @_;
    my ($st, $body) = http_post("/$loc/v1/completions", encode_json({
        model => 'smollm2', prompt => $ids, max_tokens => $n,
        temperature => 0, logprobs => 5, ignore_eos => JSON::PP::true}), 120);
    die "completion: $st $body" unless $st == 200;
    my $lp = decode_json($body)->{choices}[0]{logprobs};
    return [map { [$lp->{tokens}[$_], $lp->{top_logprobs}[$_]] }
            0 .. $#{ $lp->{tokens} }];
}

sub sorted_lp {
    my ($top) = @_;
    return sort { $b->[1] <=> $a->[1] } map { [$_, $top->{$_}] } keys %$top;
}

for my $mix (@mixes) {
    my $g = $golden{$mix};
    my $loc = lc $mix;
    my $tol = $g->{tolerance};
    my ($max_margin, $max_top, $requests, $diverged) = (0, 0, 0, 0);
    for my $case (@{ $g->{cases} }) {
        my $ref = $case->{greedy_ids};
        my $steps = @$ref;
        my ($pos, $bad) = (0, '');
        while ($pos < $steps && !$bad) {
            my $out = greedy($loc, [@{ $case->{prompt_ids} }, @$ref[0 .. $pos - 1]],
                             $steps - $pos);
            $requests++;
            if ($pos == 0) {
                # the last prompt position against the reference's top 20
                my @eng = sorted_lp($out->[0][1]);
                my %ref = map { piece($loc, $_->[0]) => $_->[1] } @{ $case->{top_logits} };
                my $ref_top = $case->{top_logits}[0];
                my $eng_top = $out->[0][1]{ piece($loc, $ref_top->[0]) };
                if (!defined $eng_top) {
                    $bad = "the reference's top id $ref_top->[0] is not in the engine's top 5";
                    last;
                }
                for my $e (@eng) {
                    next unless defined $ref{$e->[0]};
                    my $d = abs(($e->[1] - $eng_top) - ($ref{$e->[0]} - $ref_top->[1]));
                    $max_top = max($max_top, $d);
                    $bad = sprintf("prompt: %s's logit off by %.3f", $e->[0], $d)
                        if $d > 2 * $tol;
                }
            }
            if (!@$out) { $bad = 'no tokens'; last }
            my $next = $pos + @$out;            # all on the reference's path
            for my $j (0 .. $#$out) {
                my $k = $pos + $j;
                my @eng = sorted_lp($out->[$j][1]);
                my $want = piece($loc, $ref->[$k]);
                my $margin = $case->{greedy_margins}[$k];
                if ($out->[$j][0] eq $want) {
                    my $d = abs(($eng[0][1] - $eng[1][1]) - $margin);
                    $max_margin = max($max_margin, $d);
                    $bad = sprintf("step %d: margin %.3f, reference %.3f", $k,
                                   $eng[0][1] - $eng[1][1], $margin)
                        if $d > 2 * $tol;
                    next;
                }
                # the engine leaves the reference here
                $diverged++;
                my $fsms = $case->{first_small_margin_step};
                my $lp_ref = $out->[$j][1]{$want} // $eng[-1][1];
                if (($fsms < 0 || $k < $fsms) || $margin >= 2 * $tol) {
                    $bad = sprintf("step %d: engine %s, reference %s (margin %.3f)",
                                   $k, encode_json([$out->[$j][0]]), encode_json([$want]), $margin);
                } elsif ($eng[0][1] - $lp_ref > 2 * $tol) {
                    $bad = sprintf("step %d: the reference's id %.3f below the engine's pick",
                                   $k, $eng[0][1] - $lp_ref);
                }
                $next = $k + 1;
                last;
            }
            $pos = $next;
        }
        ok(!$bad, "$mix/$case->{name}: within the margin rule (tolerance $tol)"
                  . ($bad ? ": $bad" : ''));
    }
    note(sprintf("%s: %d requests, %d steps off the reference; max |margin - "
                 . "reference| %.3f, max prompt top-5 logit error %.3f",
                 $mix, $requests, $diverged, $max_margin, $max_top));
}

nginx_cmd('-s', 'stop');
done_testing();
