// The collector's debug output as the tracing tests read it.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDebugOutput } from './otelcol.ts';

const sample = [
  'ResourceSpans #0',
  'Resource SchemaURL: ',
  'Resource attributes:',
  '     -> service.name: Str(stateward-test)',
  'ScopeSpans #0',
  'ScopeSpans SchemaURL: ',
  'InstrumentationScope stateward 0.1.0',
  'Span #0',
  '    Trace ID       : 4bf92f3577b34da6a3ce929d0e0e4736',
  '    Parent ID      : ',
  '    ID             : 00f067aa0ba902b7',
  '    Name           : rollout.reconcile_group',
  '    Kind           : Internal',
  '    Start time     : 2026-11-26 00:00:00 +0000 UTC',
  '    End time       : 2026-11-26 00:00:01 +0000 UTC',
  '    Status code    : Unset',
  '    Status message : ',
  '    DroppedAttributesCount: 0',
  'Attributes:',
  '     -> rollout.group: Str(ingester)',
  'Span #1',
  '    Trace ID       : 4bf92f3577b34da6a3ce929d0e0e4736',
  '    Parent ID      : 00f067aa0ba902b7',
  '    ID             : 53995c3f42cd8ad8',
  '    Name           : HTTP DELETE',
  '    Kind           : Client',
  '    Status code    : Error',
  'Attributes:',
  '     -> url.full: Str(https://127.0.0.1:6443/api/v1/namespaces/a/pods/b: c)',
  '     -> http.response.status_code: Int(200)',
  'Events:',
  'SpanEvent #0',
  '     -> Name: exception',
  'ResourceSpans #1',
  'Resource attributes:',
  '     -> service.name: Str(other)',
  'ScopeSpans #0',
  'Span #0',
  '    Trace ID       : 0af7651916cd43dd8448eb211c80319c',
  '    Parent ID      : ',
  '    ID             : b7ad6b7169203331',
  '    Name           : x',
  '    Kind           : Server',
  '',
].join('\n');

describe('parseDebugOutput', () => {
  it('reads spans, their links, attributes and the resource of their batch', () => {
    const spans = parseDebugOutput(sample);
    assert.equal(spans.length, 3);
    const [reconcile, call, other] = spans;
    assert.deepEqual(
      { ...reconcile!, resource: undefined },
      {
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
        parentId: '',
        id: '00f067aa0ba902b7',
        name: 'rollout.reconcile_group',
        kind: 'Internal',
        statusCode: 'Unset',
        attributes: { 'rollout.group': 'ingester' },
        resource: undefined,
      },
    );
    assert.equal(call!.parentId, reconcile!.id);
    assert.equal(call!.statusCode, 'Error');
    assert.deepEqual(
      call!.attributes,
      { 'url.full': 'https://127.0.0.1:6443/api/v1/namespaces/a/pods/b: c', 'http.response.status_code': '200' },
      'event lines are not attributes',
    );
    assert.equal(reconcile!.resource['service.name'], 'stateward-test');
    assert.equal(other!.resource['service.name'], 'other');
    assert.equal(other!.kind, 'Server');
  });
});
