/** Minimal API Gateway events, as Lambda receives them (REST proxy v1 and HTTP API v2). */
import type { APIGatewayProxyEvent, APIGatewayProxyEventV2 } from 'aws-lambda';

export function restEvent(
  options: { ip?: string; headers?: Record<string, string>; body?: unknown } = {},
): APIGatewayProxyEvent {
  return {
    resource: '/things',
    path: '/things',
    httpMethod: 'POST',
    headers: { Origin: 'https://app.example', ...options.headers },
    multiValueHeaders: {},
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    body: options.body === undefined ? null : JSON.stringify(options.body),
    isBase64Encoded: false,
    requestContext: {
      identity: { sourceIp: options.ip ?? '198.51.100.7' },
    } as APIGatewayProxyEvent['requestContext'],
  };
}

export function httpApiEvent(options: { ip?: string; headers?: Record<string, string> } = {}): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: 'POST /things',
    rawPath: '/things',
    rawQueryString: '',
    headers: { origin: 'https://app.example', ...options.headers },
    isBase64Encoded: false,
    requestContext: {
      http: {
        method: 'POST',
        path: '/things',
        protocol: 'HTTP/1.1',
        sourceIp: options.ip ?? '198.51.100.8',
        userAgent: 't',
      },
    } as APIGatewayProxyEventV2['requestContext'],
  };
}
