package NgxLlm::Sdk;

# The official SDKs' suites (t/038, t/040-044) share two steps: a venv
# outside the source tree holding pinned PyPI packages, and a Python script
# whose TAP lines become the suite's own tests. One home for both.
#
# defines: sdk_venv, sdk_run

use strict;
use warnings;

use Exporter 'import';
use FindBin;
use Test::More;

our @EXPORT = qw(sdk_venv sdk_run);

# sdk_venv('openai', 'openai==3.57.0', 'jsonschema==4.26.0'): the python of
# $TEST_NGINX_BUILD/venv-NAME (build/ is ignored by git), made once and
# reused while it holds every pin; a missing pin is installed from PyPI.
# One test says the venv holds them.
sub sdk_venv {
    my ($name, @pins) = @_;
    my $build = $ENV{TEST_NGINX_BUILD} || 'build';
    my $venv = "$build/venv-$name";
    my $python = "$venv/bin/python";
    my $wanted = join ', ', map {
        my ($pkg, $version) = split /==/;
        "('$pkg', '$version')"
    } @pins;
    # exits 1 on a wrong version, and on a missing package (it raises)
    my $has = 'import sys; from importlib.metadata import version; '
            . "sys.exit(any(version(p) != v for p, v in [$wanted]))";

    if (!-x $python || system("$python -c \"$has\" 2>/dev/null") != 0) {
        note("installing @pins from PyPI into $venv");
        -x $python or system('python3', '-m', 'venv', $venv) == 0
            or BAIL_OUT("python3 -m venv $venv failed (Debian: python3-venv)");
        system("$venv/bin/pip", 'install', '--quiet', @pins) == 0
            or BAIL_OUT("pip install @pins failed (PyPI reachable?)");
    }
    is(system($python, '-c', $has), 0, "venv-$name has @pins");
    return $python;
}

# sdk_run($python, 'openai_sdk.py', timeout => 300, prefix => 'sdk: '):
# runs t/SCRIPT (the caller sets its environment), makes each of its TAP
# lines one test (a "# TODO reason" line a TODO test, whose comments show
# only under prove -v), kills it past the timeout so a hung server cannot
# hang the suite, and checks that it ran the plan it printed.
sub sdk_run {
    my ($python, $script, %opt) = @_;
    my $timeout = $opt{timeout} || 300;
    my $prefix = $opt{prefix} // '';
    my $builder = Test::More->builder;

    my $pid = open my $py, '-|', $python, "$FindBin::Bin/$script"
        or die "cannot run t/$script: $!";
    local $SIG{ALRM} = sub { diag("$script timed out"); kill 'KILL', $pid };
    alarm $timeout;

    my ($plan, $ran, $in_todo) = (undef, 0, 0);
    while (my $line = <$py>) {
        chomp $line;
        if ($line =~ /^(not )?ok \d+ - (.*?)(?: # TODO (.*))?$/) {
            my ($pass, $name, $todo) = (!defined $1, $2, $3);
            $builder->todo_start($todo) if defined $todo;
            ok($pass, "$prefix$name");
            $builder->todo_end if defined $todo;
            $in_todo = defined $todo;
            $ran++;
        } elsif ($line =~ /^1\.\.(\d+)$/) {
            $plan = $1;
        } elsif ($line =~ /^#/) {
            $in_todo ? note($line) : diag($line);
        } else {
            diag("$script: $line");
        }
    }
    close $py;
    alarm 0;
    ok(defined $plan && $plan == $ran, "$script ran its plan ($ran tests)");
}

1;
