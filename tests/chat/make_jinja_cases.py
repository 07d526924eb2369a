#!/usr/bin/env python3
"""Regenerates tests/chat/jinja_cases.json: small templates rendered by jinja2 configured
exactly as HF transformers configures it for chat templates (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, HF's tojson, raise_exception). The C++ engine must
reproduce every rendered string, and fail where jinja2 fails (same kind of error).

Usage: python3 tests/chat/make_jinja_cases.py   (needs the jinja2 package; output is committed)
"""
import json
import os

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class GenerationBlock(Extension):
    """HF's AssistantTracker as far as rendering goes: {% generation %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[GenerationBlock, loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception

MESSAGES = [
    {"role": "system", "content": "  Be brief.  "},
    {"role": "user", "content": "Hi <there> & \"you\""},
    {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!",
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": [1, 2.5, None, True]}}}]},
    {"role": "tool", "content": "{\"ok\": true}"},
    {"role": "user", "content": [{"type": "text", "text": "part A"}, {"type": "image"}, {"type": "text", "text": "part B"}]},
]
V = {"messages": MESSAGES, "n": 7, "f": 2.5, "s": "Hello World", "u": "日本語テキスト 😀",
     "lst": [3, 1, 2], "words": ["b", "A", "c", "a"], "d": {"z": 1, "a": 2, "m": {"k": [1, 2]}},
     "none": None, "t": True, "empty": "", "ws": " \t x y \n ", "users": [
         {"name": "ann", "age": 31, "admin": True}, {"name": "Bob", "age": 25, "admin": False},
         {"name": "cy", "age": 40}]}

CASES = [
    # --- whitespace control: trim_blocks, lstrip_blocks, -, + ---
    "a\n{% if true %}\nb\n{% endif %}\nc",
    "a\n    {% if true %}\n    b\n    {% endif %}\nc",
    "  {%+ if true %}x{% endif %}",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "x {{- ' y ' -}} z",
    "x\n{# comment #}\ny",
    "x\n  {# comment #}\ny",
    "x {#- c -#} y",
    "{% raw %}{{ not evaluated }}{% endraw %}",
    "a\r\nb\rc\n",
    "line\n\n",
    "{{ 'a' }}\n{{ 'b' }}\n",
    "    {{ 'indented var keeps spaces' }}",
    "{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n",
    "{%- for i in [1, 2] %}\n  {{- i }}\n{%- endfor %}",
    "\t{% if true %}tab{% endif %}",
    "a {% if true %} b {% endif %} c",
    "{{ {'a': {'b': 1}} }}",
    # --- literals and operators ---
    "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}",
    "{{ 10 / 4 }} {{ 10 / 5 }} {{ 1e3 }} {{ 1.5e-7 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 123456789.125 }}",
    "{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ -n }} {{ +n }} {{ -f }}",
    "{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] * 3 }} {{ [1, 2] + [3] }}",
    "{{ \"it's\" }} {{ 'say \"hi\"' }} {{ 'tab\\there' }} {{ 'nl\\nx' }} {{ '\\x41\\u00e9\\U0001F600' }} {{ '\\q' }}",
    "{{ 'abc' 'def' }}",
    "{{ true and 'x' }} {{ false or 'y' }} {{ none or 0 or '' or 'z' }} {{ not none }} {{ 0 and 1 }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 != '1' }}",
    "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'z' in d }} {{ 'q' not in d }} {{ 3 not in lst }}",
    "{{ 'yes' if t else 'no' }} {{ 'yes' if none else 'no' }} [{{ 'x' if false }}]",
    "{{ (1, 2) }} {{ (1,) }} {{ () }} {{ [] }} {{ {} }} {{ {'a': [1, 'x', none, true, 1.0]} }}",
    "{{ s[0] }} {{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[::2] }} {{ s[-3:] }} {{ lst[1:] }} {{ lst[::-1] }}",
    "{{ u[0] }} {{ u[-1] }} {{ u[2:5] }} {{ u|length }} {{ u[::-1] }}",
    "{{ lst[10] }}|{{ s[100] }}|{{ d.nope }}|{{ d['nope'] }}|{{ none.x }}",
    "{{ d.m.k[1] }} {{ d['m']['k'][0] }} {{ users[1].name }} {{ users.0.name }}",
    "{{ t is true }} {{ n is number }} {{ f is float }} {{ n is integer }} {{ t is number }} {{ s is string }}",
    "{{ d is mapping }} {{ lst is sequence }} {{ s is sequence }} {{ d is sequence }} {{ s is iterable }} {{ n is iterable }}",
    "{{ nope is defined }} {{ nope is undefined }} {{ none is none }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}",
    "{{ n is eq 7 }} {{ n is ne 7 }} {{ n is gt 3 }} {{ n is lt 3 }} {{ n is ge 7 }} {{ n is le 6 }} {{ 'x' is in 'xyz' }} {{ s is upper }} {{ 'abc' is lower }}",
    "{{ none is sameas none }} {{ t is sameas true }} {{ t is boolean }} {{ 1 is boolean }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ nope is not defined }}",
    # --- filters ---
    "{{ ws|trim }}|{{ 'xxhixx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello wORLD'|title }}|{{ 'hello WORLD'|capitalize }}",
    "{{ s|replace('o', '0') }} {{ s|replace('l', 'L', 2) }} {{ 'aaa'|replace('', '-') }}",
    "{{ lst|join(', ') }} {{ users|join('/', attribute='name') }} {{ 'abc'|join('.') }}",
    "{{ lst|first }} {{ lst|last }} {{ s|first }} {{ d|first }} {{ []|first }}|{{ lst|length }} {{ d|length }} {{ s|count }}",
    "{{ nope|default('dflt') }} {{ ''|default('dflt') }} {{ ''|default('dflt', true) }} {{ none|default('x') }} {{ nope|d('short') }}",
    "{{ lst|list }} {{ s|list }} {{ d|list }} {{ d|items|list }} {{ (d|items|list)[0] }}",
    "{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys()|list }} {{ d.values()|list|length }}",
    "{{ d.get('z') }} {{ d.get('nope') }} {{ d.get('nope', 5) }}",
    "{{ lst|sort }} {{ lst|sort(reverse=true) }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}",
    "{{ users|map(attribute='name')|list }} {{ words|map('upper')|list }} {{ users|map(attribute='missing', default='?')|list }}",
    "{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }}",
    "{{ users|selectattr('age', 'gt', 30)|list|length }} {{ users|selectattr('name', 'equalto', 'Bob')|first }} {{ lst|select('odd')|list }} {{ lst|reject('odd')|list }}",
    "{{ n|string }} {{ f|string }} {{ none|string }} {{ lst|string }} {{ t|string }}",
    "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }} {{ '3.5'|float }} {{ 'bad'|float }} {{ 2|float }}",
    "{{ -3|abs }} {{ (-3)|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor') }}",
    "{{ lst|sum }} {{ users|sum(attribute='age') }} {{ lst|min }} {{ lst|max }} {{ words|min }} {{ words|max }} {{ users|max(attribute='age') }}",
    "{{ words|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ lst|reverse|list }} {{ s|reverse }}",
    "{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ {'b': 2, 'a': 3}|dictsort(by='value') }}",
    "{{ 'long text here that goes on'|truncate(10) }}|{{ 'long text here that goes on'|truncate(10, true) }}|{{ 'short'|truncate(10) }}|{{ 'abcdefghijklmnop'|truncate(9, end='!') }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'x\\ny'|indent('> ') }}",
    "{{ '<a href=\"x\">&</a>'|e }} {{ '<b>'|escape }} {{ '<i>'|safe }}",
    "{{ '%s is %d years, %.2f%%'|format('ann', 31, 99.5) }} {{ '%5s|%-5s|%05d|%x|%r'|format('a', 'b', 42, 255, 'q') }}",
    "{{ 'hello'|center(11) }}|{{ 'one two  three'|wordcount }}|{{ users[0]|attr('name') }}|{{ users|attr('count') is defined }}",
    "{{ d|tojson }} {{ lst|tojson }} {{ u|tojson }} {{ none|tojson }} {{ f|tojson }} {{ 'q\"\\\\\\n\\t\\u0001'|tojson }}",
    "{{ d|tojson(indent=2) }}",
    "{{ messages[2].tool_calls[0].function.arguments|tojson }} {{ messages[2]|tojson(sort_keys=true) }}",
    "{{ u|tojson(ensure_ascii=true) }} {{ d|tojson(separators=[',', ':']) }} {{ {}|tojson(indent=2) }} {{ []|tojson(indent=4) }}",
    "{{ [1.0, 2.5, 1e20, 1e-7, -0.0, 100.0]|tojson }} {{ {'k': 1e300 * 10} }}",
    "{{ 'x'|upper|lower|replace('x', 'yy')|length }}",
    # --- string methods ---
    "{{ s.startswith('Hell') }} {{ s.endswith('xyz') }} {{ s.startswith(('x', 'H')) }} {{ s.upper() }} {{ s.lower() }} {{ s.title() }}",
    "{{ s.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ws.split() }} {{ ''.split() }}",
    "{{ ws.strip() }}|{{ ws.lstrip() }}|{{ ws.rstrip() }}|{{ '\\n\\nx\\n'.strip('\\n') }}|{{ 'xyhixy'.strip('xy') }}",
    "{{ s.replace('l', '_') }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('q') }} {{ s.count('l') }} {{ u.find('語') }}",
    "{{ '-'.join(['a', 'b']) }} {{ 'x{}y{}'.format(1, 'z') }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{name}!'.format(name='hi') }} {{ '{{}}'.format() }}",
    "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }}",
    "{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'ab'.capitalize() }} {{ 'x'.ljust(3) }}| {{ 'x'.rjust(3, '*') }} {{ '7'.zfill(3) }} {{ 'a=b'.partition('=') }}",
    "{{ 'prefix_body'.removeprefix('prefix_') }} {{ 'body.txt'.removesuffix('.txt') }}",
    "{% set c = messages[1].content %}{{ c.startswith('Hi') and c.endswith('\"') }}",
    # --- statements and scoping ---
    "{% set x = 1 %}{% for i in [1, 2, 3] %}[{{ x }}]{% set x = i %}({{ x }}){% endfor %}{{ x }}",
    "{% set x = 0 %}{% if true %}{% set x = 5 %}{% endif %}{{ x }}",
    "{% set ns = namespace(a=1, b=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }}",
    "{% set ns = namespace() %}{% set ns.x = 'set' %}{{ ns.x }} {{ ns.missing is defined }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = ['x', 'y'] %}{{ c }}{{ d }}",
    "{% set block %}inner {{ n }}{% endset %}[{{ block }}]{% set up | upper %}shout{% endset %}{{ up }}",
    "{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for i in [] %}x{% else %}empty{% endfor %}{% for i in [1] %}{{ i }}{% else %}no{% endfor %}",
    "{% for x in lst if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}",
    "{% for x in 'abc' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }} {% endfor %}",
    "{% for x in lst %}{{ loop.previtem }}-{{ loop.nextitem }} {{ loop.cycle('odd', 'even') }};{% endfor %}",
    "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}|{{ loop.index }} {% endfor %}",
    "{% for m in messages %}{{ m.role }}:{{ m.content is string }};{% endfor %}",
    "{% for m in messages[::-1] %}{{ loop.index0 }}{{ m.role[0] }}{% endfor %}",
    "{% for k in d %}{{ k }}{% endfor %} {% for c in u %}{{ c }}.{% endfor %}",
    "{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }} {% endfor %}",
    "{% for p in messages[4].content %}{% if p.type == 'text' %}{{ p.text }};{% endif %}{% endfor %}",
    "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}",
    "{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}",
    "{% macro outer(x) %}[{{ inner(x) }}]{% endmacro %}{% macro inner(y) %}<{{ y }}>{% endmacro %}{{ outer(5) }}",
    "{% set y = 1 %}{% macro show() %}{{ y }}{% endmacro %}{% set y = 2 %}{{ show() }}",
    "{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}",
    "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ n }}{% endcall %}",
    "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}({{ x }}){% endcall %}",
    "{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{% macro content(c) %}{% if c is string %}{{ c|trim }}{% else %}{% for p in c %}{{ p.text }}{% endfor %}{% endif %}{% endmacro %}{% set r = content(messages[0].content) %}[{{ r }}] {{ r.startswith('Be') }}",
    "{% filter upper %}quiet {{ s }}{% endfilter %}",
    "{% with a = 3, b = 4 %}{{ a * b }}{% endwith %}{{ a is defined }}",
    "{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {{ namespace(x=1).x }}",
    "{% set j = joiner(', ') %}{% for i in [1, 2, 3] %}{{ j() }}{{ i }}{% endfor %}",
    "{% generation %}kept{% endgeneration %}",
    "{{ messages[0].content|trim }}|{{ messages[2].content.split('</think>')[-1].lstrip('\\n') }}|{{ messages[2].content.split('</think>')[0].split('<think>')[-1].strip('\\n') }}",
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- endif %}",
    "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|map(attribute='role')|join(',') }}",
    "{{ messages[1] }}",
    "{{ d }} {{ users[2] }} {{ [u, none] }} {{ {'q': \"it's\"} }} {{ ['a\\nb'] }}",
    "{{ raise_exception is defined }} {{ range is defined }}",
    # --- idioms of other model families' templates ---
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}[{{ system_message|trim }}]{{ loop_messages|length }}",
    "{%- for message in messages|rejectattr('role', 'equalto', 'tool')|selectattr('tool_calls', 'undefined') %}{{ message.role }},{%- endfor %}",
    "{%- for message in messages %}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}[alt {{ loop.index0 }}]{%- endif %}{%- endfor %}",
    "{%- set ns = namespace(is_first=false, is_tool=false, system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%- endfor %}{{ ns.system_prompt|tojson }}",
    "{{- bos_token if bos_token is defined else '<s>' }}{%- for m in messages %}{{- '<|' + m['role'] + '|>\\n' + (m['content'] if m['content'] is string else '') + '<|end|>\\n' }}{%- endfor %}",
    "{%- for message in messages %}{%- if (message['role'] == 'assistant') %}{%- set role = 'model' %}{%- else %}{%- set role = message['role'] %}{%- endif %}{{ '<start_of_turn>' + role + '\\n' }}{%- endfor %}",
    "{{- '<|start_header_id|>' + messages[1]['role'] + '<|end_header_id|>\\n\\n' + messages[1]['content'] | trim + '<|eot_id|>' }}",
    "{{ messages[2].tool_calls|tojson(indent=4) }}",
    "{% for tc in messages[2].tool_calls %}{% if tc.function.arguments is string %}S{% else %}{{ tc.function.arguments|tojson }}{% endif %}{% endfor %}",
    "{{ (messages|last).role }} {{ messages[-1]['content']|length }} {{ messages[1:]|length }} {{ (messages|first).content|trim }}",
    "{% if messages[0].content is string and messages[0].content|length > 0 %}has system{% endif %}",
    "{{ x if x is defined else 'fallback' }} {{ 'a' if false else 'b' if false else 'c' }}",
    "{% for m in messages %}{% if loop.previtem and loop.previtem.role != 'tool' %}P{% endif %}{% if not loop.last and loop.nextitem.role != 'tool' %}N{% elif loop.last %}L{% endif %}{% endfor %}",
    "{% for k, v in messages[2].tool_calls[0].function.arguments|items %}{% set v = v | tojson | safe if v is mapping or (v is sequence and v is not string) else v | string %}{{ k }}={{ v }};{% endfor %}",
    "{% macro rc(content, do_count, is_sys=false) %}{% if content is string %}{{ content }}{% elif content is iterable and content is not mapping %}{% for item in content %}{% if 'image' in item or item.type == 'image' %}{% if is_sys %}{{ raise_exception('no images in system') }}{% endif %}<img>{% elif 'text' in item %}{{ item.text }}{% endif %}{% endfor %}{% elif content is none or content is undefined %}{% else %}{{ raise_exception('bad content') }}{% endif %}{% endmacro %}{{ rc(messages[4].content, true) }}|{{ rc(messages[0].content, false, true)|trim }}|{{ rc(none, false) }}|{{ rc(nope, false) }}",
    "{% macro rc(content, is_sys=false) %}{% for item in content %}{% if item.type == 'image' and is_sys %}{{ raise_exception('no images in system') }}{% endif %}{% endfor %}{% endmacro %}{{ rc(messages[4].content, is_sys=true) }}",
    "{%- if tools and tools is iterable and tools is not mapping %}T{%- else %}F{%- endif %}",
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}{%- for message in messages[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}{%- if ns.multi_step_tool and message.role == 'user' and message.content is string %}{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}{%- endfor %}{{ ns.last_query_index }}",
    # --- precedence ---
    "{{ -2 ** 2 }} {{ not 1 == 2 }} {{ 2 * 3|string }} {{ 1 + 2 * 3 - 4 / 2 }} {{ (1 + 2) ~ 3 }}",
    "{{ 'a' ~ 1 + 2 }}",
    "{{ 1 + 2 ~ 3 }}",
    "{{ true or false and false }} {{ (true or false) and false }} {{ not true or true }}",
    "{{ [1, 2, 3, 4, 5][4:0:-2] }} {{ [1, 2, 3][-10:10] }} {{ 'abcdef'[-2::-2] }} {{ [1, 2, 3][5:] }} {{ [1, 2,] }} {{ {'a': 1,} }}",
    "{{ 'abc' == 'abc' }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ 1 == true }} {{ 0 == false }} {{ none == none }}",
    "{% set a = 'x' %}{% set a = a ~ 'y' %}{{ a }} {% set x = [] %}{{ x + ['a'] }} {{ range(3)|join(',') }} {{ range(0)|list }}",
    "{% set café = 'é' %}{{ café }}",
    "\u3000{% if true %}x{% endif %}",
    "A {%- raw -%}  {{ x }}  {%- endraw -%} B",
    "{{ 'x' }}{# comment with {{ braces }} and %} #}{{ 'y' }}",
    "{{ users|map(attribute='name')|map('upper')|join('+') }} {{ 'a b'|wordcount }} {{ 10|string|length }} {{ '%.3f'|format(3.14159) }}",
    "{{ [1, 'a']|sort }}",
    "{{ [1, [2, [3]]]|tojson }} {{ {'a': {'b': {}}}|tojson }} {{ 3.0|tojson }} {{ 1e100|tojson }} {{ [true, false, none]|tojson }}",
    "{{ raise_exception(42) }}",
    "{% macro m(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}",
    "{% macro m(a, b='d') %}{{ a }}-{{ b }}{% endmacro %}{{ m('x', b=none) }} {{ m(a='y') }}",
    "{% set ns = namespace(n=0) %}{% macro bump() %}{% set ns.n = ns.n + 1 %}{% endmacro %}{{ bump() }}{{ bump() }}{{ ns.n }}",
    "{% for x in d|dictsort %}{{ x[0] }}{{ x[1] }};{% endfor %}",
    "{{ s.split(' ')[0] }} {{ 'abc'[1:] }} {{ '\\\\n' }} {{ '\\\\' }}",
    "{%- set content = messages[2].content %}{%- if '</think>' in content %}{%- set reasoning = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}[{{ reasoning }}][{{ content }}]",
    "{%- for message in messages %}{%- if message.content is string %}{%- set content = message.content %}{%- else %}{%- set content = '' %}{%- endif %}{{ loop.index }}:{{ content|length }} {% endfor %}",
    "{% for m in messages %}{% if loop.last and m.role == 'user' %}LAST{% endif %}{% endfor %}",
    "{%- if tools is defined and tools %}T{%- else %}N{%- endif %}",
    "{{ messages[0] is mapping }} {{ messages is sequence }} {{ messages[4].content is iterable }} {{ messages[4].content is not string }}",
    "{% set x %}  padded  {% endset %}[{{ x }}] [{{ x|trim }}]",
    "{{ n // 0 }}",
    "{{ [1,2,3]|first(5) }}",
    "{{ s|truncate(3) }}",
    "{{ 'a' * -1 }}|{{ 'ab' * 0 }}|{{ [] * 3 }}",
    "{{ 5 in 'abc' }}",
    "{{ d['m'] is mapping }} {{ d.m.k|length }} {{ d.m.get('k') }} {{ d.get('m').get('k')[0] }}",
    # --- undefined semantics ---
    "{{ nope }}|{{ nope|length }}|{% for x in nope %}x{% endfor %}|{{ nope ~ 'x' }}|{{ not nope }}|{% if nope %}y{% else %}n{% endif %}",
    "{{ d.nope is defined }} {{ d.m.nope is defined }} {{ messages[0].reasoning_content is defined }} {{ messages[0].reasoning_content is none }}",
    "{{ nope == nope }} {{ nope != 1 }} {{ nope is string }} {{ nope|string }}|{{ nope|upper }}|{{ nope|trim }}|{{ nope|join }}|{{ nope|list }}|{{ nope|items|list }}",
    # --- errors ---
    "{{ raise_exception('custom failure') }}",
    "{% if messages|length > 1 %}{{ raise_exception('too many: ' ~ messages|length) }}{% endif %}",
    "{{ nope.attr }}",
    "{{ nope + 1 }}",
    "{{ nope() }}",
    "{{ d.nope.deeper }}",
    "{{ 1 + 'a' }}",
    "{{ 'a' + 1 }}",
    "{{ 1 / 0 }}",
    "{{ 1 < 'a' }}",
    "{{ none|length }}",
    "{{ nope|tojson }}",
    "{% for a, b in [[1, 2, 3]] %}{% endfor %}",
    "{% set x = 1 %}{% set x.y = 2 %}",
    "{{ lst.append(4) }}",
    "{{ range(1000000)|length }}",
    "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{% endmacro %}{{ m(b=2) }}",
    "{{ 'abc'.index('z') }}",
    "{% if %}{% endif %}",
    "{% for x in %}{% endfor %}",
    "{% if true %}unclosed",
    "{% endif %}",
    "{{ 'unterminated }}",
    "{{ (1 }}",
    "{{ 1 + }}",
    "{% unknowntag %}",
    "{% break %}",
    "{{ x is is defined }}",
    "{# never closed",
    "{% include 'other.jinja' %}",
    "{% macro m(a=1, b) %}{% endmacro %}",
]


def classify(exc):
    # Python's own SyntaxError comes from compiling the template (e.g. break outside a loop).
    if isinstance(exc, (jinja2.exceptions.TemplateSyntaxError, SyntaxError)):
        return "syntax"
    if type(exc) is jinja2.exceptions.TemplateError:
        return "raised"
    return "runtime"


def main():
    out = []
    for src in CASES:
        case = {"template": src}
        try:
            case["rendered"] = ENV.from_string(src).render(**V)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded as the expectation
            case["error"] = {"kind": classify(exc), "message": str(exc)}
        out.append(case)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jinja_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/chat/make_jinja_cases.py", "jinja2": jinja2.__version__,
                   "variables": V, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(out)} cases to {path}")


if __name__ == "__main__":
    main()
