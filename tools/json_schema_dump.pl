#!/usr/bin/perl
# The schemas the Test::Nginx files send, one JSON line each, for
# tools/json_schema_dump.sh: every JSON body (response_format's json_schema,
# tools' parameters) and every Perl `schema => {...}` / `parameters =>
# {...}` literal that evaluates on its own (one naming a variable is
# skipped).
#
# usage: json_schema_dump.pl t/*.t > schemas.jsonl
use strict;
use warnings;
use JSON::PP;

my $json = JSON::PP->new->canonical(1)->utf8;   # Perl hashes: sorted keys
my @out;

sub walk {
    my ($v) = @_;
    if (ref $v eq 'HASH') {
        my $js = $v->{json_schema};
        push @out, $js->{schema} if ref $js eq 'HASH' && exists $js->{schema};
        my $fn = $v->{function};
        push @out, $fn->{parameters}
            if ref $fn eq 'HASH' && exists $fn->{parameters};
        walk($_) for values %$v;
    } elsif (ref $v eq 'ARRAY') {
        walk($_) for @$v;
    }
}

# the balanced {...} from position i of s, or undef
sub braces {
    my ($s, $i) = @_;
    my ($depth, $q) = (0, '');
    for (my $j = $i; $j < length $s; $j++) {
        my $ch = substr($s, $j, 1);
        if ($q) {
            if ($ch eq '\\') { $j++; next }
            $q = '' if $ch eq $q;
            next;
        }
        if ($ch eq '"' || $ch eq "'") { $q = $ch; next }
        $depth++ if $ch eq '{';
        $depth-- if $ch eq '}';
        return substr($s, $i, $j - $i + 1) if $depth == 0;
    }
    return undef;
}

for my $path (@ARGV) {
    open my $fh, '<', $path or die "$path: $!";
    my $text = do { local $/; <$fh> };
    close $fh;
    # JSON bodies (request blocks)
    my $dec = JSON::PP->new->utf8(0);
    for (my $i = 0; ($i = index($text, '{', $i)) >= 0; $i++) {
        my $b = braces($text, $i) // next;
        my $v = eval { $dec->decode($b) } or next;
        walk($v);
        $i += length($b) - 1;
    }
    # Perl literals
    while ($text =~ /(?:\b(?:schema|parameters)\s*=>|\bmy\s+\$\w*schema\w*\s*=)\s*(?=\{)/g) {
        my $b = braces($text, pos($text)) // next;
        next if $b =~ /[\$\@]/;
        no strict;
        my $v = eval "package Sandbox; use JSON::PP; my \$x = $b; \$x";
        push @out, $v if ref $v;
    }
}
print $json->encode($_), "\n" for @out;
